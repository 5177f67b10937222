//! Reading JSON that a client command sends (`clutch send FILE`, `clutch agents register CARD`):
//! from a file, or from stdin when the path is `-`.

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
