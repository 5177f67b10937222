//! Positions as SKILL.md files: the shipped six, the seed's example parsed to the seed's structure,
//! every validation error at its file and line, the catalog over a directory, and system prompts.

use std::path::Path;

use clutch_runtime::skill::{self, Catalog, MAX_BYTES, MessageKind, Params, Pattern, Role, SessionFacts, Skill, Stage};

/// The seed's mirror example (§6), with front matter and an ESCALATE type added.
const SEED_MIRROR: &str = "---
pattern: mirror
---
# Mirror Position

## Overview
Two agents independently analyze the same target and compare results.

## Agents
### Reflector
- **Personality**: Thorough, methodical, detail-oriented
- **Responsibilities**:
  - Perform primary analysis of target
  - Document findings with evidence
  - Calculate verification checksum

### Verifier
- **Personality**: Skeptical, precise, independent
- **Responsibilities**:
  - Perform independent analysis
  - Compare results with Reflector
  - Flag discrepancies

## Workflow
1. **DISCOVERY**: Both agents receive target, acknowledge readiness
2. **ANALYSIS**: Independent parallel analysis
3. **EXCHANGE**: Share results with checksums
4. **COMPARISON**: Identify matches and discrepancies
5. **SYNTHESIS**: Produce unified report or escalate

## Communication Protocol
- READY_TO_SHARE: Signal completion of analysis phase
- RESULTS: Share analysis with checksum
- DISCREPANCY: Flag disagreement on specific point
- CONSENSUS: Agreement reached
- ESCALATE: Ask a human to decide
";

/// A small valid solo position.
const SOLO: &str = "---
pattern: solo
description: Sorts incoming requests.
---
# Triage

## Overview
One agent sorts requests.

## Agents
### Sorter
- **Personality**: Quick
- **Responsibilities**: Sort each request into a queue

## Workflow
1. **SORT**: Sort the request

## Protocol
- `RESULTS`: The queue chosen
";

fn names<T>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<&str> {
    items.iter().map(name).collect()
}

#[test]
fn every_shipped_position_parses_as_expected() {
    type Expected = (&'static str, Pattern, &'static [&'static str], &'static [&'static str], &'static [&'static str]);
    let expected: [Expected; 6] = [
        (
            "contemplator",
            Pattern::Solo,
            &["Contemplator"],
            &["FRAMING", "EXPLORATION", "REFLECTION", "ANSWER"],
            &["RESULTS", "ESCALATE"],
        ),
        (
            "mirror",
            Pattern::Mirror,
            &["Reflector", "Verifier"],
            &["DISCOVERY", "ANALYSIS", "EXCHANGE", "COMPARISON", "SYNTHESIS"],
            &["READY_TO_SHARE", "RESULTS", "DISCREPANCY", "CONSENSUS", "ESCALATE", "ACKNOWLEDGE"],
        ),
        (
            "relay",
            Pattern::Relay,
            &["Drafter", "Editor", "Finisher"],
            &["INTAKE", "DRAFT", "EDIT", "FINISH", "DELIVERY"],
            &["HANDOFF", "RESULTS", "QUERY", "RESPONSE", "ESCALATE"],
        ),
        (
            "pyramid",
            Pattern::Pyramid,
            &["Lead", "Researcher", "Analyst", "Builder"],
            &["DECOMPOSITION", "ASSIGNMENT", "EXECUTION", "REVIEW", "SYNTHESIS"],
            &["INSTRUCTION", "SUBTASK", "RESULTS", "QUERY", "RESPONSE", "ESCALATE"],
        ),
        (
            "swarm",
            Pattern::Swarm,
            &["Scout", "Aggregator"],
            &["PARTITION", "EXPLORATION", "REPORTING", "AGGREGATION"],
            &["RESULTS", "ACKNOWLEDGE", "ESCALATE"],
        ),
        (
            "circle",
            Pattern::Circle,
            &["Pragmatist", "Visionary", "Skeptic"],
            &["FRAMING", "PROPOSAL", "DELIBERATION", "VOTE", "RESOLUTION"],
            &["PROPOSAL", "VOTE", "CONSENSUS", "ESCALATE"],
        ),
    ];
    let shipped = skill::shipped();
    assert_eq!(names(&shipped, |s| &s.name), names(&expected, |e| e.0));
    for (skill, (name, pattern, roles, phases, protocol)) in shipped.iter().zip(expected) {
        assert_eq!(skill.pattern, pattern, "{name}");
        assert_eq!(names(&skill.agents, |r| &r.name), roles, "{name}");
        assert_eq!(names(&skill.workflow, |p| &p.name), phases, "{name}");
        assert_eq!(names(&skill.protocol, |k| &k.name), protocol, "{name}");
        assert_eq!(skill.source, format!("shipped:{name}"));
        assert!(skill.description.is_some(), "{name}");
        assert!(skill.title.ends_with("Position"), "{name}: {}", skill.title);
        assert!(skill.overview.contains("\n\nUse it "), "{name}: two paragraphs: {}", skill.overview);
        assert!(skill.agents.iter().all(|r| r.responsibilities.len() >= 3), "{name}");
        assert!(skill.success_criteria.len() >= 3 && skill.error_handling.len() >= 3, "{name}");
    }
    let params: Vec<Params> = shipped.iter().map(|s| s.params).collect();
    let none = Params::default();
    assert_eq!(
        params,
        [
            none,
            none,
            none,
            none,
            Params { workers: Some(3), ..none },
            Params { rounds: Some(3), quorum: Some(0.5), ..none }
        ]
    );

    // The same files read from the directory, as an operator's copies would be.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("positions");
    let (mut from_dir, errors) = skill::check_dir(&dir);
    assert_eq!(errors, []);
    from_dir.sort_by_key(|s| shipped.iter().position(|t| t.name == s.name));
    for (file, shipped) in from_dir.iter().zip(&shipped) {
        assert_eq!(file.source, dir.join(format!("{}.md", shipped.name)).display().to_string());
        assert_eq!(&Skill { source: shipped.source.clone(), ..file.clone() }, shipped);
    }
}

#[test]
fn the_seed_example_parses_to_the_seed_structure() {
    let role = |name: &str, personality: &str, responsibilities: &[&str]| Role {
        name: name.into(),
        personality: personality.into(),
        responsibilities: responsibilities.iter().map(|r| r.to_string()).collect(),
    };
    let phase = |name: &str, description: &str| Stage { name: name.into(), description: description.into() };
    let kind = |name: &str, description: &str| MessageKind { name: name.into(), description: description.into() };
    let expected = Skill {
        name: "mirror".into(),
        title: "Mirror Position".into(),
        pattern: Pattern::Mirror,
        description: None,
        overview: "Two agents independently analyze the same target and compare results.".into(),
        agents: vec![
            role(
                "Reflector",
                "Thorough, methodical, detail-oriented",
                &[
                    "Perform primary analysis of target",
                    "Document findings with evidence",
                    "Calculate verification checksum",
                ],
            ),
            role(
                "Verifier",
                "Skeptical, precise, independent",
                &["Perform independent analysis", "Compare results with Reflector", "Flag discrepancies"],
            ),
        ],
        workflow: vec![
            phase("DISCOVERY", "Both agents receive target, acknowledge readiness"),
            phase("ANALYSIS", "Independent parallel analysis"),
            phase("EXCHANGE", "Share results with checksums"),
            phase("COMPARISON", "Identify matches and discrepancies"),
            phase("SYNTHESIS", "Produce unified report or escalate"),
        ],
        protocol: vec![
            kind("READY_TO_SHARE", "Signal completion of analysis phase"),
            kind("RESULTS", "Share analysis with checksum"),
            kind("DISCREPANCY", "Flag disagreement on specific point"),
            kind("CONSENSUS", "Agreement reached"),
            kind("ESCALATE", "Ask a human to decide"),
        ],
        success_criteria: vec![],
        error_handling: vec![],
        params: Params::default(),
        source: "skills/duet/mirror/SKILL.md".into(),
    };
    assert_eq!(skill::parse(SEED_MIRROR, "skills/duet/mirror/SKILL.md", "mirror"), Ok(expected.clone()));
    // The same with Windows line ends and a byte-order mark.
    let windows = format!("\u{feff}{}", SEED_MIRROR.replace('\n', "\r\n"));
    assert_eq!(skill::parse(&windows, "skills/duet/mirror/SKILL.md", "mirror"), Ok(expected.clone()));
    let error = skill::parse(&windows.replace("### Verifier", "### Reflector"), "m.md", "m").unwrap_err();
    assert_eq!(error.line, 17);

    // On the wire: snake_case, and back.
    let json = serde_json::to_value(&expected).unwrap();
    assert_eq!(json["pattern"], "mirror");
    assert_eq!(json["agents"][1]["responsibilities"][2], "Flag discrepancies");
    assert_eq!(json["params"], serde_json::json!({"rounds": null, "quorum": null, "workers": null}));
    assert_eq!(serde_json::from_value::<Skill>(json).unwrap(), expected);
}

#[test]
fn the_other_ways_of_writing_items_parse_too() {
    let skill = skill::parse(SOLO, "triage.md", "triage").unwrap();
    assert_eq!(skill.name, "triage");
    assert_eq!(skill.description.as_deref(), Some("Sorts incoming requests."));
    assert_eq!(skill.agents[0].responsibilities, ["Sort each request into a queue"]);
    assert_eq!(skill.protocol, [MessageKind { name: "RESULTS".into(), description: "The queue chosen".into() }]);

    // Bold types, a colon inside the bold, loose lists, a wrapped line, unknown sections and a
    // name from the front matter; case-insensitive section names.
    let text = "---\n# a comment\nname: \"sorter-2\"\npattern: 'solo'\n---\nIntro, ignored.\n\n# Triage\n\n\
                ## overview\nFirst paragraph\nwrapped.\n\n- a point\n\n## Notes\n- ignored\n\n## AGENTS\n\
                Some words.\n\n### Sorter\n\n- **Personality:** Quick\n\n\
                - **Responsibilities**:\n\n  - Sort\n  - Route\n\n\
                ## Workflow\n1. **SORT**: Sort `it`\n\n## Communication protocol\n- **RESULTS**: Done\n\n\
                ## Success criteria\n- Sorted\n\n## Error handling\n- **Unknown queue**: ask\n";
    let skill = skill::parse(text, "x.md", "x").unwrap();
    assert_eq!(skill.name, "sorter-2");
    assert_eq!(skill.overview, "First paragraph wrapped.\n\n- a point");
    assert_eq!(
        skill.agents[0],
        Role {
            name: "Sorter".into(),
            personality: "Quick".into(),
            responsibilities: vec!["Sort".into(), "Route".into()]
        }
    );
    assert_eq!(skill.workflow[0].description, "Sort `it`");
    assert_eq!(skill.protocol[0].name, "RESULTS");
    assert_eq!(skill.success_criteria, ["Sorted"]);
    assert_eq!(skill.error_handling, ["Unknown queue: ask"]);
}

/// Replacements `(from, to)` in `SEED_MIRROR`.
type Edits<'a> = &'a [(&'a str, &'a str)];

/// `SEED_MIRROR` with each `(from, to)` replaced once.
fn edited(edits: &[(&str, &str)]) -> String {
    let mut text = SEED_MIRROR.to_owned();
    for (from, to) in edits {
        assert!(text.contains(from), "{from:?} is not in the example");
        text = text.replacen(from, to, 1);
    }
    text
}

#[test]
fn each_mistake_is_reported_at_its_line() {
    let three_roles =
        "  - Flag discrepancies\n\n### Arbiter\n- **Personality**: Fair\n- **Responsibilities**:\n  - Decide\n";
    // (edits to the example, the line, what was expected)
    let cases: &[(Edits, usize, &str)] = &[
        (&[("# Mirror Position\n", "")], 5, r####"a title line "# ...""####),
        (
            &[("## Overview\nTwo agents independently analyze the same target and compare results.\n\n", "")],
            4,
            r####"a "## Overview" section"####,
        ),
        (
            &[("Two agents independently analyze the same target and compare results.\n", "")],
            6,
            r####"text under "## Overview""####,
        ),
        (
            &[("- **Personality**: Skeptical, precise, independent\n", "")],
            17,
            r####""- **Personality**: ..." under "### Verifier""####,
        ),
        (
            &[("- **Personality**: Skeptical, precise, independent", "- **Personality**:")],
            18,
            r####"a text after "- **Personality**:" under "### Verifier""####,
        ),
        (
            &[(
                "- **Responsibilities**:\n  - Perform independent analysis\n  - Compare results with Reflector\n  \
                 - Flag discrepancies\n",
                "",
            )],
            17,
            r####""- **Responsibilities**:" and a list of them under "### Verifier""####,
        ),
        (&[("### Verifier", "### reflector")], 17, r####"a role name of its own: "reflector" is also at line 10"####),
        (
            &[("### Verifier", "### Veri/fier")],
            17,
            r####"a role name of 1 to 64 letters, digits, spaces, - or _, found "Veri/fier""####,
        ),
        (
            &[("## Agents\n", "## Agents\nNo roles yet.\n\n## Later\n")],
            9,
            r####"at least one role, "### Name", under "## Agents""####,
        ),
        (
            &[("2. **ANALYSIS**: Independent", "2. Independent")],
            26,
            r####"an item of the form "1. **PHASE**: description" under "## Workflow""####,
        ),
        (
            &[("1. **DISCOVERY**", "1. **Discovery**")],
            25,
            r####"a phase name in UPPER_SNAKE_CASE like "DISCOVERY", found "Discovery""####,
        ),
        (
            &[("1. **DISCOVERY**", "- **DISCOVERY**")],
            25,
            r####"a numbered item "1. **PHASE**: description" under "## Workflow""####,
        ),
        (
            &[("2. **ANALYSIS**: Independent parallel analysis", "2. **ANALYSIS**:")],
            26,
            r####"a description after "**ANALYSIS**:""####,
        ),
        (
            &[("- CONSENSUS: Agreement reached", "- RESULTS: Agreement reached")],
            35,
            "a message type of its own: RESULTS is also at line 33",
        ),
        (
            &[("- RESULTS: Share", "- results: Share")],
            33,
            r####"a message type in UPPER_SNAKE_CASE like "RESULTS", found "results""####,
        ),
        (
            &[("- RESULTS: Share analysis with checksum", "- Share analysis with checksum")],
            33,
            r####"an item of the form "- TYPE: description" under "## Communication Protocol""####,
        ),
        (&[("## Communication Protocol", "## Protocol Notes")], 4, r####"a "## Communication Protocol" section"####),
        (&[("## Workflow", "## Protocol")], 31, r####"one "## Communication Protocol" section (one is at line 24)"####),
        (
            &[("pattern: mirror", "description: no pattern")],
            3,
            r####""pattern: ..." in the front matter (solo, mirror, relay, pyramid, swarm, circle)"####,
        ),
        (
            &[("---\npattern: mirror\n---\n", "")],
            1,
            r####""pattern: ..." in the front matter (solo, mirror, relay, pyramid, swarm, circle)"####,
        ),
        (
            &[("pattern: mirror", "pattern: mirror\nowner: ada")],
            3,
            r####"a front-matter key (name, pattern, description, rounds, quorum, workers), found "owner""####,
        ),
        (
            &[("pattern: mirror", "pattern: mirror\npattern: relay")],
            3,
            "pattern once in the front matter (it is also at line 2)",
        ),
        (
            &[("pattern: mirror", "pattern: duet")],
            2,
            r####"a pattern (solo, mirror, relay, pyramid, swarm, circle), found "duet""####,
        ),
        (
            &[("pattern: mirror", "pattern mirror")],
            2,
            r####""key: value" in the front matter, found "pattern mirror""####,
        ),
        (&[("pattern: mirror\n---\n", "pattern: mirror\n")], 1, r####"a closing "---" line after the front matter"####),
        (
            &[("pattern: mirror", "pattern: mirror\nname: Mirror")],
            3,
            r####"name to be 1 to 64 characters a-z, 0-9 or -, found "Mirror""####,
        ),
        (
            &[("pattern: mirror", "pattern: mirror\nrounds: 3")],
            3,
            "rounds only with the circle pattern (this position's is mirror)",
        ),
        (
            &[("pattern: mirror", "pattern: circle\nquorum: 1.5")],
            3,
            r####"quorum to be a number greater than 0 and at most 1, found "1.5""####,
        ),
        (
            &[("pattern: mirror", "pattern: swarm\nworkers: 0")],
            3,
            r####"workers to be a whole number of at least 1, found "0""####,
        ),
        (&[("  - Flag discrepancies\n", three_roles)], 9, "exactly 2 roles for the mirror pattern, found 3"),
        (
            &[("pattern: mirror", "pattern: relay")],
            31,
            r####"a "- HANDOFF: ..." message type, which the relay pattern needs"####,
        ),
        (
            &[("- CONSENSUS: Agreement reached\n", "")],
            31,
            r####"a "- CONSENSUS: ..." message type, which the mirror pattern needs"####,
        ),
        (
            &[
                ("pattern: mirror", "pattern: circle"),
                ("- READY_TO_SHARE: Signal completion of analysis phase", "- PROPOSAL: A proposal"),
            ],
            31,
            r####"a "- VOTE: ..." message type, which the circle pattern needs"####,
        ),
        (&[("pattern: mirror", "pattern: solo")], 9, "exactly 1 role for the solo pattern, found 2"),
    ];
    for (edits, line, expected) in cases {
        let text = edited(edits);
        let error = skill::parse(&text, "positions/mirror.md", "mirror").expect_err(&text);
        assert_eq!(error.to_string(), format!("positions/mirror.md:{line}: expected {expected}"), "{edits:?}");
    }

    // A name from the file that is not one: the front matter must give it.
    let error = skill::parse(SEED_MIRROR, "My Mirror.md", "My Mirror").unwrap_err();
    assert_eq!(
        error.to_string(),
        concat!(
            r####"My Mirror.md:1: expected a "name:" in the front matter: the default, "My Mirror", is not "####,
            "1 to 64 characters a-z, 0-9 or -"
        )
    );

    // Too large: refused before it is read as Markdown.
    let mut large = SEED_MIRROR.to_owned();
    large.push_str(&"<!-- padding -->\n".repeat(MAX_BYTES / 17 + 1));
    let error = skill::parse(&large, "big.md", "big").unwrap_err();
    assert_eq!(
        error,
        skill::Error {
            file: "big.md".into(),
            line: 1,
            expected: format!("a file of at most 256 KiB, found {} bytes", large.len())
        }
    );
}

#[test]
fn the_catalog_overrides_and_adds_by_name_and_reports_bad_files() {
    // No directory, or one that does not exist: the shipped six.
    let shipped: Vec<String> = skill::shipped().into_iter().map(|s| s.name).collect();
    let names = |c: &Catalog| c.list().map(|s| s.name.clone()).collect::<Vec<_>>();
    let mut sorted = shipped.clone();
    sorted.sort();
    assert_eq!(names(&Catalog::load(None).unwrap()), sorted);
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(names(&Catalog::load(Some(&dir.path().join("absent"))).unwrap()), sorted);

    // NAME.md overrides a shipped position; NAME/SKILL.md adds one; README.md and hidden files are
    // not positions.
    let mirror = dir.path().join("mirror.md");
    std::fs::write(&mirror, SEED_MIRROR.replace("# Mirror Position", "# Our Mirror")).unwrap();
    std::fs::create_dir(dir.path().join("triage")).unwrap();
    let triage = dir.path().join("triage/SKILL.md");
    std::fs::write(&triage, SOLO).unwrap();
    std::fs::write(dir.path().join("README.md"), "# Our positions\n").unwrap();
    std::fs::write(dir.path().join(".draft.md"), "not yet").unwrap();
    std::fs::create_dir(dir.path().join("notes")).unwrap();

    let catalog = Catalog::load(Some(dir.path())).unwrap();
    let mut expected = sorted.clone();
    expected.push("triage".into());
    expected.sort();
    assert_eq!(names(&catalog), expected);
    let ours = catalog.get("mirror").unwrap();
    assert_eq!((ours.title.as_str(), ours.source.clone()), ("Our Mirror", mirror.display().to_string()));
    assert_eq!(catalog.get("triage").unwrap().source, triage.display().to_string());
    assert_eq!(catalog.get("relay").unwrap().source, "shipped:relay");
    assert_eq!(catalog.get("nope"), None);

    let (found, errors) = skill::check_dir(dir.path());
    assert_eq!((names_of(&found), errors), (vec!["mirror", "triage"], vec![]));

    // Bad files: every one reported, and the catalog refused; a second file naming a position is
    // one too.
    std::fs::write(dir.path().join("broken.md"), "---\npattern: solo\n---\n# Broken\n").unwrap();
    std::fs::create_dir(dir.path().join("mirror")).unwrap();
    std::fs::write(dir.path().join("mirror/SKILL.md"), SEED_MIRROR).unwrap();
    std::fs::write(dir.path().join("latin1.md"), b"---\npattern: solo\n---\n# Caf\xe9\n").unwrap();
    let errors = Catalog::load(Some(dir.path())).unwrap_err();
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let path = |p: &str| dir.path().join(p).display().to_string();
    assert_eq!(
        lines,
        [
            format!(r####"{}:4: expected a "## Overview" section"####, path("broken.md")),
            format!("{}:4: expected UTF-8 text", path("latin1.md")),
            format!(
                r####"{}:1: expected a position name of its own: "mirror" is also {}"####,
                path("mirror.md"),
                path("mirror/SKILL.md")
            ),
        ]
    );
    let (found, errors) = skill::check_dir(dir.path());
    assert_eq!((names_of(&found), errors.len()), (vec!["mirror", "triage"], 3));
    assert_eq!(found[0].source, path("mirror/SKILL.md"));

    // A directory that cannot be listed.
    let (found, errors) = skill::check_dir(&triage);
    assert!(found.is_empty());
    assert!(
        errors[0].to_string().starts_with(&format!("{}: expected a readable directory (", triage.display())),
        "{errors:?}"
    );
}

fn names_of(skills: &[Skill]) -> Vec<&str> {
    skills.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn a_system_prompt_tells_the_agent_its_part() {
    let catalog = Catalog::load(None).unwrap();
    let mirror = catalog.get("mirror").unwrap();
    let facts = SessionFacts {
        session_id: "ses_01".into(),
        agent_id: "agent:mirror-verifier".into(),
        others: vec![("Reflector".into(), "agent:mirror-reflector".into())],
    };
    let prompt = mirror.system_prompt("verifier", &facts).unwrap();
    let verifier = &mirror.agents[1];
    for expected in [
        "You are Verifier, an AI agent in a Clutch \"Mirror Position\" position (mirror).".to_owned(),
        format!("## Your Role\n{}\n", verifier.personality),
        format!("- {}\n", verifier.responsibilities[0]),
        format!("- {}\n", verifier.responsibilities[3]),
        "- Session ID: ses_01\n- Position: mirror\n- Your Agent ID: agent:mirror-verifier\n\
         - Other Agents: Reflector (agent:mirror-reflector)\n"
            .to_owned(),
        format!("1. **DISCOVERY**: {}\n", mirror.workflow[0].description),
        format!("5. **SYNTHESIS**: {}\n", mirror.workflow[4].description),
        "Use the sessions_send tool to message other agents (to an agent id or \"all\") with one of these types:\n"
            .to_owned(),
        format!("- READY_TO_SHARE: {}\n", mirror.protocol[0].description),
        format!("- ACKNOWLEDGE: {}\n", mirror.protocol[5].description),
        "- Stay in character as Verifier\n".to_owned(),
        "- If you encounter an error or need human help, send an ESCALATE message\n".to_owned(),
    ] {
        assert!(prompt.contains(&expected), "{expected:?} is not in:\n{prompt}");
    }
    assert!(!prompt.contains("gallery"));
    assert_eq!(mirror.system_prompt("Arbiter", &facts), None);

    // Alone, and without an ESCALATE type.
    let solo = skill::parse(SOLO, "triage.md", "triage").unwrap();
    let facts = SessionFacts { others: vec![], ..facts };
    let prompt = solo.system_prompt("Sorter", &facts).unwrap();
    assert!(prompt.contains("- Other Agents: none\n"), "{prompt}");
    assert!(!prompt.contains("ESCALATE"), "{prompt}");
}

#[test]
fn a_circle_round_is_won_by_the_quorum_and_no_tie() {
    let default = Params::default();
    let cases: &[(Params, &[u32], u32, Option<usize>)] = &[
        (default, &[2, 1], 3, Some(0)),
        (default, &[0, 1, 2], 3, Some(2)),
        (default, &[1, 1, 1], 3, None),
        (default, &[1, 0, 0], 3, None),
        (default, &[2, 1, 1], 4, Some(0)),
        (default, &[2, 2], 4, None),
        (default, &[], 3, None),
        (default, &[0, 0], 3, None),
        (Params { quorum: Some(1.0), ..default }, &[3], 3, Some(0)),
        (Params { quorum: Some(1.0), ..default }, &[2, 0], 3, None),
        (Params { quorum: Some(0.25), ..default }, &[1, 0, 0, 0], 4, Some(0)),
        (Params { quorum: Some(0.25), ..default }, &[1, 1, 0, 0], 4, None),
    ];
    for (params, tally, voters, winner) in cases {
        assert_eq!(params.winner(tally, *voters), *winner, "{params:?} {tally:?} of {voters}");
    }
    assert_eq!((default.rounds_or_default(), default.quorum_or_default(), default.workers_or_default()), (3, 0.5, 3));
}
