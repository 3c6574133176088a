//! Who the peer is, on the command line: `braid keygen`, key files, pinned
//! public keys, one-time codes, or an explicit `--insecure`.

use crate::UsageError;
use anyhow::{bail, Context as _};
use braid::{Keypair, PublicKey, Security};
use clap::Args;
use rand::Rng;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct KeygenArgs {
    /// Where to write the secret key (hex); the public key goes to FILE.pub.
    #[arg(long, short, value_name = "FILE", default_value = "braid.key")]
    output: PathBuf,
    /// Replace existing key files.
    #[arg(long)]
    overwrite: bool,
}

/// `braid keygen`: a fresh key pair; prints the public key.
pub fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    let public_path = pub_path(&args.output);
    for p in [&args.output, &public_path] {
        if p.exists() && !args.overwrite {
            bail!(
                "{} exists; pass --overwrite to replace it (the old key stops working)",
                p.display()
            );
        }
    }
    let key = braid::random_keypair();
    let mut secret = key.secret_hex();
    secret.push('\n');
    write_file(&args.output, &secret, 0o600)?;
    write_file(&public_path, &format!("{}\n", key.public()), 0o644)?;
    eprintln!(
        "secret key: {} (mode 0600; keep it private)\npublic key: {} (give it to senders)",
        args.output.display(),
        public_path.display()
    );
    println!("{}", key.public());
    Ok(ExitCode::SUCCESS)
}

fn pub_path(secret: &Path) -> PathBuf {
    let mut name = secret.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Creates or truncates `path` with `mode`, whatever the umask or an
/// existing file's mode.
fn write_file(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(mode);
    }
    let mut f = opts
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    Ok(())
}

/// Reads a key file of `braid keygen`.
pub fn load_key(path: &Path) -> anyhow::Result<Keypair> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read key file {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)?.permissions().mode();
        if mode & 0o077 != 0 {
            eprintln!(
                "braid: warning: {} is readable by others (mode {:o}); chmod 600 it",
                path.display(),
                mode & 0o777
            );
        }
    }
    Keypair::from_secret_hex(text.trim())
        .with_context(|| format!("{} is not a braid key file", path.display()))
}

/// Protection options of `braid recv`.
#[derive(Args)]
pub struct RecvSecurity {
    /// This receiver's key file (from `braid keygen`); senders pin its
    /// public key with --peer. Default: a one-time code.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["code", "insecure"])]
    key: Option<PathBuf>,
    /// Use this one-time code instead of generating one.
    #[arg(long, value_name = "CODE", conflicts_with = "insecure")]
    code: Option<String>,
    /// No encryption and no authentication: anyone on the path can read or
    /// change the transfer. For tests and benchmarks.
    #[arg(long)]
    insecure: bool,
}

/// How a receiver proves itself, and what to tell the sender.
pub struct RecvIdentity {
    pub security: Security,
    /// The sender's option that matches, e.g. `--code 7-purple-sausage`.
    pub sender_option: String,
}

impl RecvSecurity {
    pub fn resolve(&self) -> anyhow::Result<RecvIdentity> {
        if self.insecure {
            warn_insecure();
            return Ok(RecvIdentity {
                security: Security::insecure(),
                sender_option: "--insecure".into(),
            });
        }
        if let Some(path) = &self.key {
            let key = load_key(path)?;
            let option = format!("--peer {}", key.public());
            return Ok(RecvIdentity {
                security: Security::server(key),
                sender_option: option,
            });
        }
        let code = match &self.code {
            Some(c) => check_code(c)?,
            None => new_code(),
        };
        Ok(RecvIdentity {
            sender_option: format!("--code {code}"),
            security: Security::code(code),
        })
    }
}

/// Protection options of `braid send`: exactly one.
#[derive(Args)]
#[group(required = true, multiple = false)]
pub struct SendSecurity {
    /// The receiver's public key, as `braid recv --key` prints it.
    #[arg(long, value_name = "KEY", value_parser = parse_public_key)]
    peer: Option<PublicKey>,
    /// The one-time code `braid recv` printed.
    #[arg(long, value_name = "CODE")]
    code: Option<String>,
    /// No encryption and no authentication (the receiver must agree).
    #[arg(long)]
    insecure: bool,
}

impl SendSecurity {
    pub fn resolve(&self) -> anyhow::Result<Security> {
        if self.insecure {
            warn_insecure();
            return Ok(Security::insecure());
        }
        if let Some(peer) = &self.peer {
            return Ok(Security::pinned(*peer));
        }
        match &self.code {
            Some(code) => Ok(Security::code(check_code(code)?)),
            None => Err(UsageError::new("give --peer KEY, --code CODE or --insecure").into()),
        }
    }
}

fn parse_public_key(s: &str) -> Result<PublicKey, String> {
    s.trim()
        .parse()
        .map_err(|e| format!("{e}: give the key `braid recv --key` prints"))
}

fn warn_insecure() {
    eprintln!(
        "braid: warning: --insecure: nothing is encrypted or authenticated; \
         anyone on the path can read, change or end the transfer"
    );
}

fn check_code(code: &str) -> anyhow::Result<String> {
    let code = code.trim();
    if code.chars().count() < 6 {
        return Err(UsageError::new("a code needs at least 6 characters").into());
    }
    Ok(code.to_owned())
}

/// A code like `417-amber-walrus`: 1000 numbers and 256 x 256 words,
/// about 2^26 choices. Short enough to read out; a PAKE makes that enough,
/// since each wrong guess costs an attacker a handshake and the receiver
/// gives up after a few.
pub fn new_code() -> String {
    let mut rng = rand::rngs::OsRng;
    let n: u16 = rng.gen_range(0..1000);
    let a = WORDS[rng.gen_range(0..WORDS.len())];
    let b = WORDS[rng.gen_range(0..WORDS.len())];
    format!("{n}-{a}-{b}")
}

/// 256 short, distinct, easy-to-spell words.
const WORDS: [&str; 256] = [
    "acid", "acorn", "actor", "adobe", "agent", "alarm", "album", "alpha", "amber", "anchor",
    "angel", "ankle", "apple", "apron", "arena", "arrow", "aspen", "atlas", "attic", "autumn",
    "bacon", "badge", "bagel", "baker", "bamboo", "banjo", "barley", "basil", "beach", "beacon",
    "bean", "beaver", "berry", "bison", "blade", "blanket", "blossom", "bonus", "boulder",
    "bracket", "branch", "bread", "breeze", "brick", "bridge", "bronze", "brush", "bubble",
    "bucket", "buffalo", "bugle", "butter", "cabin", "cactus", "camel", "canal", "candle", "canoe",
    "canyon", "carbon", "cargo", "carpet", "carrot", "castle", "cedar", "cello", "chalk", "cherry",
    "chess", "cider", "cinema", "circus", "citrus", "clover", "cobalt", "cocoa", "comet", "copper",
    "coral", "cotton", "cougar", "crane", "crater", "crayon", "cricket", "crystal", "cumin",
    "daisy", "delta", "denim", "desert", "diesel", "dingo", "dolphin", "donkey", "dragon", "drum",
    "eagle", "ember", "engine", "falcon", "fern", "ferry", "fiddle", "flute", "forest", "fossil",
    "fox", "galaxy", "garden", "garlic", "gecko", "ginger", "glacier", "goblet", "gravel",
    "guitar", "hammer", "harbor", "harp", "hazel", "helmet", "heron", "hickory", "honey", "hornet",
    "husky", "igloo", "indigo", "iris", "island", "ivory", "jacket", "jaguar", "jasmine", "jelly",
    "jigsaw", "juniper", "kayak", "kettle", "kiwi", "koala", "ladder", "lagoon", "lantern",
    "lemon", "lilac", "lily", "linen", "lizard", "lobster", "locket", "lotus", "magnet", "mango",
    "maple", "marble", "meadow", "melon", "meteor", "mint", "mirror", "mitten", "mohair",
    "monsoon", "mosaic", "muffin", "mustard", "nectar", "needle", "nickel", "noodle", "nutmeg",
    "oasis", "ocean", "olive", "onion", "opal", "orbit", "orchid", "otter", "oyster", "paddle",
    "panda", "papaya", "parrot", "peach", "pebble", "pelican", "pepper", "piano", "pickle",
    "pigeon", "pillow", "pine", "planet", "plum", "pocket", "pollen", "poppy", "potato", "pretzel",
    "puffin", "pumpkin", "quartz", "quill", "rabbit", "radar", "radish", "raven", "ribbon",
    "river", "rocket", "saddle", "saffron", "salmon", "sandal", "sausage", "shovel", "silver",
    "sketch", "sparrow", "spinach", "sponge", "squid", "statue", "sugar", "summit", "tango",
    "teapot", "thistle", "thunder", "tiger", "timber", "tomato", "topaz", "tulip", "tundra",
    "turnip", "velvet", "violin", "walnut", "walrus", "wasabi", "willow", "zebra", "anvil",
    "bobcat", "cashew", "domino", "easel", "fjord", "gazebo", "hamlet", "iguana", "jersey",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_list_is_distinct_and_plain() {
        let mut sorted = WORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), WORDS.len());
        assert!(WORDS
            .iter()
            .all(|w| w.len() >= 3 && w.bytes().all(|b| b.is_ascii_lowercase())));
    }

    #[test]
    fn codes_have_a_number_and_two_words() {
        let code = new_code();
        let parts: Vec<&str> = code.split('-').collect();
        assert_eq!(parts.len(), 3, "{code}");
        assert!(parts[0].parse::<u16>().unwrap() < 1000);
        assert!(WORDS.contains(&parts[1]) && WORDS.contains(&parts[2]));
        assert_ne!(
            new_code(),
            new_code(),
            "two codes in a row differ (almost surely)"
        );
    }
}
