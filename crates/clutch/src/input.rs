//! Reading what a client command sends: JSON (`clutch send FILE`, `clutch agents register CARD`)
//! from a file or from stdin when the path is `-`; text arguments as given, from stdin (`-`) or from
//! a file (`@PATH`).

use std::io::{IsTerminal, Read};
use std::path::Path;

use anyhow::Context;
use serde_json::Value;

/// The JSON in `path` (`-` for stdin), and a name for it to use in messages (`stdin` or the path).
pub fn json(path: &Path) -> anyhow::Result<(Value, String)> {
    let (text, name) = if path == Path::new("-") {
        let mut text = String::new();
        if std::io::stdin().is_terminal() {
            eprintln!("clutch: reading JSON from stdin; end it with Ctrl-D");
        }
        std::io::stdin().read_to_string(&mut text).context("cannot read stdin")?;
        (text, "stdin".to_owned())
    } else {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        (text, path.display().to_string())
    };
    let value = serde_json::from_str(&text).with_context(|| format!("{name} is not valid JSON"))?;
    Ok((value, name))
}

/// A text argument: itself, stdin when it is `-`, or the file it names as `@PATH`.
pub fn text_arg(arg: &str) -> anyhow::Result<String> {
    match arg {
        "-" => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("cannot read stdin")?;
            Ok(text)
        }
        s if s.starts_with('@') => {
            std::fs::read_to_string(&s[1..]).with_context(|| format!("cannot read the file {}", &s[1..]))
        }
        s => Ok(s.to_owned()),
    }
}
