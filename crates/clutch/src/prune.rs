//! `clutch runs prune`: the retention policy applied now (`POST /v1/retention/prune`), or, with
//! `--dry-run`, the runs it would archive and remove (`GET /v1/retention`). A table for people, or
//! the daemon's JSON for programs.

use clap::Args;
use clutch_core::view;
use serde_json::Value;

use crate::args::ClientArgs;
use crate::client::{Client, typed};
use crate::render;
use crate::table::Table;

pub const EXAMPLES: &str = "EXAMPLES:
  clutch runs prune --dry-run        which ended runs would be archived and removed now
  clutch runs prune                  archive and remove them now (admins only)
  clutch runs prune --json           the daemon's answer as JSON

  The policy is the daemon's: `[retention] after` (and `archive`, `remove`) in clutch.toml,
  and `retention.workflows.<name>.after_days` in org.yaml. Archives are read back with
  `clutch runs replay --file FILE`.";

#[derive(Debug, Args)]
pub struct PruneArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Change nothing: list the runs a pass would archive and remove now.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: PruneArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let request = if args.dry_run { client.get("/v1/retention") } else { client.post("/v1/retention/prune") };
    let answer: Value = client.json(request).await?;
    if args.json {
        return render::print(&format!("{answer}\n"));
    }
    let report: view::Retention = typed(answer)?;
    if !report.enabled {
        eprintln!(
            "clutch: no retention policy is set, so nothing ever goes; set `[retention] after_days` in clutch.toml \
             (or `retention.workflows` in org.yaml)"
        );
        return Ok(());
    }
    render::print(&describe(&report, render::stdout_color()))
}

fn describe(report: &view::Retention, color: bool) -> String {
    let mut out = String::new();
    if !report.runs.is_empty() {
        let mut table = Table::new(&["RUN", "LAST ACTIVITY", "EVENTS", "WORKFLOW", "ARCHIVE"]);
        for run in &report.runs {
            table.row(vec![
                run.run_id.as_str().into(),
                run.last_activity.as_str().into(),
                run.events.to_string().into(),
                run.workflow.as_deref().unwrap_or("-").into(),
                run.archive.as_deref().unwrap_or("-").into(),
            ]);
        }
        out.push_str(&table.render(color));
    }
    let verb = match (report.dry_run, report.runs.first().is_none_or(|r| r.removed)) {
        (true, true) => "would remove",
        (true, false) => "would archive",
        (false, true) => "removed",
        (false, false) => "archived",
    };
    out.push_str(&format!("{verb} {} runs ({} events)", report.runs_total, report.events_total));
    if report.runs_total as usize > report.runs.len() {
        out.push_str(&format!("; the first {} are listed", report.runs.len()));
    }
    out.push('\n');
    if !report.in_flight.is_empty() {
        out.push_str(&format!(
            "{} old enough but with work in flight, left alone: {}\n",
            report.in_flight.len(),
            report.in_flight.join(", ")
        ));
    }
    if report.more {
        out.push_str("more of the log is old enough than one pass reads: the next pass goes on\n");
    }
    out
}
