//! Gangplank library.
