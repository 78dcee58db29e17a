//! `tracehound completions SHELL` and `tracehound man`: generated from the command line's own
//! definitions, so they list every command and option the binary takes.

mod common;

use common::{run, success};

const COMMANDS: [&str; 8] = [
    "analyze",
    "report",
    "diff",
    "merge",
    "summary",
    "tui",
    "info",
    "completions",
];

#[test]
fn the_bash_completion_script_is_valid_bash_and_knows_every_command() {
    let script = success(&run(&["completions", "bash"]));
    for c in COMMANDS {
        assert!(script.contains(c), "{c}");
    }
    for option in [
        "--gap-threshold-us",
        "--rules",
        "--skip-rules",
        "--color",
        "--format",
    ] {
        assert!(script.contains(option), "{option}");
    }
    // bash reads it without a syntax error (`bash -n`), where bash is installed.
    if let Ok(out) = std::process::Command::new("bash")
        .args(["-n", "-c", &script])
        .output()
    {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let s = success(&run(&["completions", shell]));
        assert!(s.contains("analyze"), "{shell}");
    }
    let bad = run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn the_manual_page_is_roff_with_every_command() {
    let page = success(&run(&["man"]));
    assert!(page.contains(".TH tracehound 1"), "{page}");
    assert!(page.contains(".SH NAME") && page.contains(".SH SYNOPSIS"));
    for c in COMMANDS {
        assert!(page.contains(c), "{c}");
    }
}
