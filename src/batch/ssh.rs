//! The `ssh` plugin's key pair: an Ed25519 key in OpenSSH's formats, made from a seed the
//! caller draws, and the Secret that holds it (`<job>-ssh-<job's UID>`, mounted at `/root/.ssh`
//! in every pod): `id_ed25519`, `id_ed25519.pub`, `authorized_keys` (the same public key, so
//! every pod logs into every other without a password) and `config` (no host key prompts
//! between the job's pods).
//!
//! The name holds the Job's UID so that no other Secret has it by accident (another tool's
//! `<job>-ssh`, or the Secret of an earlier Job of the same name not yet garbage-collected):
//! when creating it answers "already exists", the Secret is this Job's own, made by an earlier
//! reconcile, and its key is kept. Gangplank may not read Secrets, so it cannot check the
//! owner of one made on purpose under that name; whoever may create Secrets in the Job's
//! namespace may also change the Job's own, so such a Secret gives them nothing more.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use ring::signature::{Ed25519KeyPair, KeyPair};

use super::names::{JOB_NAME_LABEL, owned_by};
use crate::api::batch_job::BatchJob;

/// Where the Secret is mounted.
pub const SSH_DIRECTORY: &str = "/root/.ssh";

/// The name of the job's ssh Secret (see the module docs).
pub fn secret_name(job: &BatchJob) -> String {
    let name = job.name_any();
    match job.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => format!("{name}-ssh-{uid}"),
        _ => format!("{name}-ssh"),
    }
}

/// An SSH wire-format string: its length, then its bytes.
fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// The private key (`-----BEGIN OPENSSH PRIVATE KEY-----` ...) and the public key line of the
/// Ed25519 key made from `seed`; `check` fills the private section's check words.
pub fn key_pair(seed: &[u8; 32], check: u32, comment: &str) -> (String, String) {
    let pair = Ed25519KeyPair::from_seed_unchecked(seed).expect("any 32 bytes are a seed");
    let public = pair.public_key().as_ref();
    let mut blob = Vec::new();
    string(&mut blob, b"ssh-ed25519");
    string(&mut blob, public);
    let mut private = Vec::new();
    private.extend_from_slice(&check.to_be_bytes());
    private.extend_from_slice(&check.to_be_bytes());
    string(&mut private, b"ssh-ed25519");
    string(&mut private, public);
    let mut secret = seed.to_vec();
    secret.extend_from_slice(public);
    string(&mut private, &secret);
    string(&mut private, comment.as_bytes());
    let mut pad = 1u8;
    while private.len() % 8 != 0 {
        private.push(pad);
        pad += 1;
    }
    let mut key = b"openssh-key-v1\0".to_vec();
    string(&mut key, b"none");
    string(&mut key, b"none");
    string(&mut key, b"");
    key.extend_from_slice(&1u32.to_be_bytes());
    string(&mut key, &blob);
    string(&mut key, &private);
    let encoded = STANDARD.encode(&key);
    let mut pem = String::from("-----BEGIN OPENSSH PRIVATE KEY-----\n");
    for line in encoded.as_bytes().chunks(70) {
        pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str("-----END OPENSSH PRIVATE KEY-----\n");
    let public_line = format!("ssh-ed25519 {} {comment}\n", STANDARD.encode(&blob));
    (pem, public_line)
}

/// The job's ssh Secret, its key made from `seed` and `check`.
pub fn secret(job: &BatchJob, seed: &[u8; 32], check: u32) -> Secret {
    let name = job.name_any();
    let (private, public) = key_pair(seed, check, &format!("{name}@gangplank"));
    let config = "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\nLogLevel ERROR\n";
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(job)),
            namespace: job.namespace(),
            owner_references: Some(vec![owned_by(job)]),
            labels: Some(BTreeMap::from([(JOB_NAME_LABEL.to_owned(), name.clone())])),
            ..ObjectMeta::default()
        },
        string_data: Some(BTreeMap::from([
            ("id_ed25519".to_owned(), private),
            ("id_ed25519.pub".to_owned(), public.clone()),
            ("authorized_keys".to_owned(), public),
            ("config".to_owned(), config.to_owned()),
        ])),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads an SSH wire-format string at the front of `bytes`.
    fn take<'b>(bytes: &mut &'b [u8]) -> &'b [u8] {
        let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        let (value, rest) = bytes[4..].split_at(len);
        *bytes = rest;
        value
    }

    #[test]
    fn the_private_key_is_openssh_v1_unencrypted_holding_the_seed_and_its_public_half() {
        let seed = [7; 32];
        let (private, public) = key_pair(&seed, 0x1234_5678, "train@gangplank");
        assert!(private.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
        assert!(private.ends_with("-----END OPENSSH PRIVATE KEY-----\n"));
        assert!(private.lines().all(|l| l.len() <= 70));
        let body: String = private
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let key = STANDARD.decode(body).unwrap();
        let mut rest = key.strip_prefix(b"openssh-key-v1\0").unwrap();
        assert_eq!(take(&mut rest), b"none", "cipher");
        assert_eq!(take(&mut rest), b"none", "kdf");
        assert_eq!(take(&mut rest), b"", "kdf options");
        assert_eq!(rest[..4], 1u32.to_be_bytes(), "one key");
        rest = &rest[4..];
        let blob = take(&mut rest).to_vec();
        let mut section = take(&mut rest);
        assert!(rest.is_empty());
        assert_eq!(section.len() % 8, 0, "padded to whole blocks");
        assert_eq!(section[..4], section[4..8], "check words");
        section = &section[8..];
        assert_eq!(take(&mut section), b"ssh-ed25519");
        let public_key = take(&mut section).to_vec();
        let secret = take(&mut section);
        assert_eq!(secret[..32], seed);
        assert_eq!(secret[32..], public_key[..]);
        assert_eq!(take(&mut section), b"train@gangplank");
        assert_eq!(
            public,
            format!("ssh-ed25519 {} train@gangplank\n", STANDARD.encode(&blob))
        );
    }
}
