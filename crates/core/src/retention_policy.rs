//! The operator's retention policy ([`Options`], the `[retention]` section of the config file), apart
//! from the service that applies it ([`crate::retention`], which re-exports it as its own): the
//! engine's options hold the policy and the service drives the engine, so the policy sits below both.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The operator's retention policy: the `[retention]` section of the config file. Off until `after`
/// is set (or org.yaml's `retention.workflows` names workflows of their own).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Options {
    /// Runs whose newest event is older than this go (`"90d"`); absent: only the workflows org.yaml
    /// names.
    #[serde(with = "crate::options::optional", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::options::Text>")]
    pub after: Option<Duration>,
    /// Write each run to `<archive_dir>/<day of its last event>/<run>.ndjson.gz` before it goes
    /// (`clutch runs replay --file` reads it).
    pub archive: bool,
    /// Where archives go (the daemon's default: `<data_dir>/archive`; none: no archive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive_dir: Option<PathBuf>,
    /// Remove the run's events from the log (after archiving them, when `archive`).
    pub remove: bool,
    /// Events removed per transaction: the longest one removal holds the log's writer.
    pub chunk: usize,
    /// Events a pass reads at most per age, so that a pass is bounded whatever the backlog; the
    /// next pass continues.
    pub scan_max: usize,
    /// Time between passes.
    #[serde(with = "crate::options::duration")]
    #[schemars(with = "crate::options::Text")]
    pub interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            after: None,
            archive: true,
            archive_dir: None,
            remove: true,
            chunk: 1000,
            scan_max: 100_000,
            interval: Duration::from_secs(3600),
        }
    }
}

impl Options {
    /// The rules types alone do not say; the first one broken.
    pub fn check(&self) -> std::result::Result<(), crate::options::Invalid> {
        use crate::options::{Invalid, nonzero, positive};
        positive("chunk", self.chunk as u64)?;
        positive("scan_max", self.scan_max as u64)?;
        nonzero("interval", self.interval)?;
        if !self.archive && !self.remove {
            return Err(Invalid::new(
                "archive",
                "with neither `archive` nor `remove` a pass would do nothing; set one to true",
            ));
        }
        match self.after {
            Some(after) if after.is_zero() => {
                Err(Invalid::new("after", "must be longer than 0s; leave it out to turn retention off"))
            }
            Some(after) if after > Duration::from_secs(36_500 * 86_400) => {
                Err(Invalid::new("after", "must be at most 36500d (100 years); leave it out to turn retention off"))
            }
            _ => Ok(()),
        }
    }

    /// Where each run is archived before it goes; none: it is not.
    pub(crate) fn archive_to(&self) -> Option<&Path> {
        self.archive_dir.as_deref().filter(|_| self.archive)
    }
}
