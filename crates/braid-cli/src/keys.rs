//! Who the peer is, on the command line: `braid keygen`, key files, pinned
//! public keys, one-time codes, or an explicit `--insecure`.

use crate::failure::{Failure, Kind};
use crate::usage::UsageError;
use anyhow::{bail, Context as _};
use braid::{Keypair, PublicKey, Security};
use clap::Args;
use rand::Rng;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use zeroize::Zeroizing;

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
            return Err(Failure::err(
                Kind::Local,
                format!(
                    "{} exists; pass --overwrite to replace it (the old key stops working)",
                    p.display()
                ),
            ));
        }
    }
    let key = braid::random_keypair();
    let hex = key.secret_hex();
    let mut secret = Zeroizing::new(Vec::with_capacity(hex.len() + 1));
    secret.extend_from_slice(hex.as_bytes());
    secret.push(b'\n');
    write_file(&args.output, &secret, 0o600)?;
    write_file(
        &public_path,
        format!("{}\n", key.public()).as_bytes(),
        0o644,
    )?;
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
fn write_file(path: &Path, text: &[u8], mode: u32) -> anyhow::Result<()> {
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
    f.write_all(text)?;
    f.sync_all()?;
    Ok(())
}

/// Longest key file or public key file read: a key is 64 hex digits.
const KEY_FILE_MAX: u64 = 4096;

/// Reads a key file of `braid keygen`. Like ssh, refuses one that other
/// users may read or change; the text read is wiped once parsed.
pub fn load_key(path: &Path) -> anyhow::Result<Keypair> {
    let mut f = std::fs::File::open(path)
        .with_context(|| format!("cannot read key file {}", path.display()))?;
    let meta = f.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        if meta.is_file() && mode & 0o077 != 0 {
            bail!(
                "key file {0} is accessible by other users (mode {1:04o}); \
                 a secret key must be private: run `chmod 600 {0}`",
                path.display(),
                mode & 0o777
            );
        }
    }
    let text = read_small(&mut f, meta.len())
        .with_context(|| format!("cannot read key file {}", path.display()))?;
    std::str::from_utf8(&text)
        .ok()
        .and_then(|t| Keypair::from_secret_hex(t).ok())
        .with_context(|| format!("{} is not a braid key file", path.display()))
}

/// A key file's content in one allocation, wiped on drop.
fn read_small(f: &mut std::fs::File, len: u64) -> anyhow::Result<Zeroizing<Vec<u8>>> {
    if len > KEY_FILE_MAX {
        bail!("too long for a key ({len} bytes)");
    }
    // Room for all of it up front, so no reallocation leaves a copy behind.
    let mut text = Zeroizing::new(Vec::with_capacity(KEY_FILE_MAX as usize + 1));
    f.take(KEY_FILE_MAX + 1).read_to_end(&mut text)?;
    if text.len() as u64 > KEY_FILE_MAX {
        bail!("too long for a key");
    }
    Ok(text)
}

/// Protection options of `braid recv`.
#[derive(Args)]
pub struct RecvSecurity {
    /// This receiver's key file (from `braid keygen`); senders pin its
    /// public key with --peer. Default: a one-time code.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["code", "insecure"])]
    key: Option<PathBuf>,
    /// With --key: accept only senders presenting this public key (as
    /// text, or a .pub file from `braid keygen`; they give its secret
    /// half with `braid send --key`). Repeat to allow several.
    #[arg(long, value_name = "KEY|FILE", value_parser = parse_public_key, requires = "key")]
    allow: Vec<PublicKey>,
    /// Use this one-time code instead of generating one: a number and two
    /// words, like 417-amber-walrus.
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
    /// The sender's option that matches, e.g. `--code 7-purple-sausage`
    /// (wiped on drop: it may hold the code).
    pub sender_option: Zeroizing<String>,
}

impl RecvSecurity {
    /// Whether `resolve` makes up a new code each time.
    pub fn generates_code(&self) -> bool {
        !self.insecure && self.key.is_none() && self.code.is_none()
    }

    /// The mode `resolve` gives, known before it runs (a record of a
    /// receiver stopped early still says it).
    pub fn mode(&self) -> crate::failure::Mode {
        use crate::failure::Mode;
        if self.insecure {
            Mode::Insecure
        } else if self.key.is_some() {
            Mode::Key
        } else {
            Mode::Code
        }
    }

    pub fn resolve(&self) -> anyhow::Result<RecvIdentity> {
        if self.insecure {
            warn_insecure();
            return Ok(RecvIdentity {
                security: Security::insecure(),
                sender_option: Zeroizing::new("--insecure".into()),
            });
        }
        if let Some(path) = &self.key {
            let key = load_key(path)?;
            let mut option = format!("--peer {}", key.public());
            if !self.allow.is_empty() {
                option.push_str(" --key KEYFILE");
            }
            return Ok(RecvIdentity {
                security: Security::Server {
                    identity: key,
                    allowed_clients: self.allow.clone(),
                    code: None,
                },
                sender_option: Zeroizing::new(option),
            });
        }
        let code = match &self.code {
            Some(c) => check_code(c)?,
            None => new_code(),
        };
        Ok(RecvIdentity {
            sender_option: Zeroizing::new(format!("--code {}", code.as_str())),
            security: Security::code(&code),
        })
    }
}

/// Protection options of `braid send`: exactly one of --peer, --code and
/// --insecure.
#[derive(Args)]
#[command(group(
    clap::ArgGroup::new("protection")
        .args(["peer", "code", "insecure"])
        .required(true)
))]
pub struct SendSecurity {
    /// The receiver's public key: the text `braid recv --key` prints, or
    /// the .pub file `braid keygen` wrote.
    #[arg(long, value_name = "KEY|FILE", value_parser = parse_public_key)]
    peer: Option<PublicKey>,
    /// With --peer: this sender's key file (from `braid keygen`), for a
    /// receiver that allows only some senders (`braid recv --allow`).
    /// Default: a fresh key for each transfer.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["code", "insecure"])]
    key: Option<PathBuf>,
    /// The one-time code `braid recv` printed (any case; spaces, dashes or
    /// underscores between its parts).
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
            let identity = self.key.as_deref().map(load_key).transpose()?;
            return Ok(Security::Pinned {
                peer: *peer,
                identity,
            });
        }
        match &self.code {
            Some(code) => Ok(Security::code(&check_code(code)?)),
            None => Err(UsageError::new("give --peer KEY, --code CODE or --insecure").into()),
        }
    }
}

/// A public key given on the command line: its 64 hex digits, or a file
/// holding them (the FILE.pub of `braid keygen`).
fn parse_public_key(s: &str) -> Result<PublicKey, String> {
    const HINT: &str = "give the key `braid recv --key` prints, or its .pub file";
    if let Ok(key) = s.trim().parse() {
        return Ok(key);
    }
    let path = Path::new(s);
    if !path.is_file() {
        return Err(format!(
            "{s:?} is neither a public key (64 hex digits) nor a file: {HINT}"
        ));
    }
    if pub_path(path).exists() {
        return Err(format!(
            "{} is a secret key file ({} is next to it): give the public key, never the secret one",
            path.display(),
            pub_path(path).display()
        ));
    }
    let text = std::fs::File::open(path)
        .map_err(anyhow::Error::from)
        .and_then(|mut f| {
            let len = f.metadata()?.len();
            read_small(&mut f, len)
        })
        .map_err(|e| format!("cannot read {}: {e:#}", path.display()))?;
    std::str::from_utf8(&text)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| format!("{} does not hold a public key: {HINT}", path.display()))
}

fn warn_insecure() {
    eprintln!(
        "braid: warning: --insecure: nothing is encrypted or authenticated; \
         anyone on the path can read, change or end the transfer"
    );
}

/// A code as typed, normalised (`braid_proto::crypto::normalize_code`) and
/// checked to have the shape `braid recv` prints: a number (up to three
/// digits) and two words of three or more letters.
fn check_code(code: &str) -> anyhow::Result<Zeroizing<String>> {
    let code = Zeroizing::new(braid_proto::crypto::normalize_code(code));
    let problem = code_shape_problem(&code);
    match problem {
        None => Ok(code),
        Some(p) => Err(UsageError::new(format!(
            "{p}; a code is a number and two words, like 417-amber-walrus \
             (any case; spaces, dashes or underscores between them)"
        ))
        .into()),
    }
}

/// What is wrong with a normalised code's shape, if anything.
fn code_shape_problem(code: &str) -> Option<String> {
    if code.is_empty() {
        return Some("the code is empty".into());
    }
    let parts: Vec<&str> = code.split('-').collect();
    if parts.len() != 3 {
        let n = parts.len();
        let s = if n == 1 { "" } else { "s" };
        return Some(format!("the code has {n} part{s}, not 3"));
    }
    let number = parts[0];
    if number.is_empty() || number.len() > 3 || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Some("the code does not start with a number of 1 to 3 digits".into());
    }
    for (which, word) in ["first", "second"].iter().zip(&parts[1..]) {
        if word.len() < 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
            return Some(format!(
                "the code's {which} word is not 3 or more letters a to z"
            ));
        }
    }
    None
}

/// A code like `417-amber-walrus`: 1000 numbers and 256 x 256 words,
/// about 2^26 choices. Short enough to read out; a PAKE makes that enough,
/// since each wrong guess costs an attacker a handshake and the receiver
/// gives up after a few.
pub fn new_code() -> Zeroizing<String> {
    let mut rng = rand::rngs::OsRng;
    let n: u16 = rng.gen_range(0..1000);
    let a = WORDS[rng.gen_range(0..WORDS.len())];
    let b = WORDS[rng.gen_range(0..WORDS.len())];
    Zeroizing::new(format!("{n}-{a}-{b}"))
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
    fn a_malformed_code_is_named_in_plain_words() {
        assert_eq!(
            code_shape_problem("417").as_deref(),
            Some("the code has 1 part, not 3")
        );
        assert_eq!(
            code_shape_problem("417-amber").as_deref(),
            Some("the code has 2 parts, not 3")
        );
        assert_eq!(code_shape_problem("417-amber-walrus"), None);
    }

    #[test]
    fn codes_have_a_number_and_two_words() {
        let code = new_code();
        let parts: Vec<&str> = code.split('-').collect();
        assert_eq!(parts.len(), 3, "{}", code.as_str());
        assert!(parts[0].parse::<u16>().unwrap() < 1000);
        assert!(WORDS.contains(&parts[1]) && WORDS.contains(&parts[2]));
        assert_ne!(
            new_code(),
            new_code(),
            "two codes in a row differ (almost surely)"
        );
        assert_eq!(check_code(&code).unwrap(), code);
    }

    #[test]
    fn codes_are_checked_after_normalising() {
        for typed in [
            "464 river attic",
            "464-River-Attic",
            " 464-river-attic ",
            "464_RIVER attic",
        ] {
            assert_eq!(check_code(typed).unwrap().as_str(), "464-river-attic");
        }
        for (bad, problem) in [
            ("", "empty"),
            ("  - ", "empty"),
            ("464 river", "2 parts"),
            ("464-river-attic-bean", "4 parts"),
            ("river-464-attic", "number"),
            ("4644-river-attic", "number"),
            ("464-r1ver-attic", "first word"),
            ("464-river-at", "second word"),
        ] {
            let e = check_code(bad).unwrap_err().to_string();
            assert!(e.contains(problem), "{bad:?}: {e}");
            assert!(e.contains("like 417-amber-walrus"), "{e}");
        }
    }
}
