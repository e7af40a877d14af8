//! The batch Job `ssh` plugin's key, read by OpenSSH's own `ssh-keygen` (installed by
//! `scripts/install-deps.sh`): it must take the private key as written and derive from it the
//! public key the plugin put in `authorized_keys`.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

#[test]
fn ssh_keygen_reads_the_plugins_private_key_and_derives_the_same_public_key() {
    let dir = std::env::temp_dir().join(format!("gangplank-ssh-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("id_ed25519");
    for seed in [[0u8; 32], [7; 32], [255; 32]] {
        let (private, public) = gangplank::batch::ssh::key_pair(&seed, 42, "train@gangplank");
        std::fs::write(&path, private).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let derived = Command::new("ssh-keygen")
            .arg("-y")
            .arg("-f")
            .arg(&path)
            .output()
            .expect("ssh-keygen runs (scripts/install-deps.sh installs openssh-client)");
        assert!(
            derived.status.success(),
            "{}",
            String::from_utf8_lossy(&derived.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&derived.stdout), public);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
