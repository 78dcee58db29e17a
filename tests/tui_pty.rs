//! The real binary in a real pseudo-terminal (tmux): open a trace, switch screens, search, open
//! help, quit; the screen text at each step, and that the terminal is restored afterwards
//! (alternate screen left, raw mode off). `.ci/run` installs tmux where it is missing; without
//! it the test says so and skips.

mod common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    /// A detached session `t` of `width` x `height` running `script` in sh.
    fn start(socket: String, width: usize, height: usize, script: &str) -> Tmux {
        let tmux = Tmux { socket };
        let (w, h) = (width.to_string(), height.to_string());
        tmux.cmd(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &w,
            "-y",
            &h,
            "sh",
            "-c",
            script,
        ]);
        tmux
    }

    fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "t"])
    }

    /// Waits until the screen contains `needle` (the binary redraws after each key).
    fn wait_for(&self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(needle) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "waited for {needle:?}; the screen is:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the screen contains every one of `needles`: a capture can come while the
    /// binary is still drawing, so a check waits for all it reads, not only for the first.
    fn wait_for_all(&self, needles: &[&str]) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if needles.iter().all(|n| s.contains(n)) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "waited for {needles:?}; the screen is:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the screen no longer contains `needle`.
    fn wait_without(&self, needle: &str) {
        let start = Instant::now();
        while self.screen().contains(needle) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "waited for {needle:?} to go"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.cmd(&args);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

#[test]
fn a_session_in_a_real_terminal() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_tracehound");
    let trace = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let script = format!(
        "'{bin}' tui '{}'; echo EXITED rc=$?; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo STTY-DONE; sleep 60",
        trace.display()
    );
    let tmux = Tmux::start(
        format!("tracehound-test-{}", std::process::id()),
        110,
        32,
        &script,
    );
    tmux.wait_for_all(&["1 Findings", "GPU 0 idle 82% of the window", "input-bound"]);

    tmux.keys(&["2"]);
    tmux.wait_for_all(&["GPU 0 stream 7", "host 701/701"]);

    tmux.keys(&["4"]);
    tmux.wait_for("kernels (GPU time)");
    tmux.keys(&["/", "n", "c", "h", "w", "Enter"]);
    tmux.wait_for_all(&["filter \"nchw\"", "nchwToNhwcKernel"]);

    // cuDNN's CUTLASS kernels are recorded mangled (`_ZN17cutlass__5x_cudnn6KernelI…`): the
    // filter finds them by their demangled text, the table tells the two convolutions apart
    // by their GemmShape, and Enter shows the selected one whole.
    tmux.keys(&["Escape", "/"]);
    tmux.keys(&["-l", "cudnn::kernel<"]);
    tmux.keys(&["Enter"]);
    let s = tmux.wait_for_all(&[
        "filter \"cudnn::kernel<\"",
        ": 3 rows",
        "cutlass__5x_cudnn::Kernel<…GemmShape<64, 128, 16>",
        "cutlass__5x_cudnn::Kernel<…GemmShape<64, 64, 32>",
    ]);
    assert!(!s.contains("_ZN"), "{s}");
    tmux.keys(&["Enter"]);
    tmux.wait_for_all(&[
        "whole name · Enter or Esc hides it",
        "cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::conv::kernel::ImplicitGemmConvolution<",
        "cutlass__5x_cudnn::gemm::GemmShape<64,",
        "recorded as a mangled symbol of 1675 characters: _ZN17cutlass__5x_cudnn6KernelI",
    ]);
    tmux.keys(&["Escape"]);
    tmux.wait_without("recorded as a mangled symbol");

    tmux.keys(&["?"]);
    tmux.wait_for_all(&["keys (any key closes)", "drill in"]);
    tmux.keys(&["Escape"]);

    tmux.keys(&["1", "q"]);
    let s = tmux.wait_for("STTY-DONE");
    assert!(s.contains("EXITED rc=0"), "{s}");
    // The alternate screen is gone and the line discipline is back to cooked mode with echo.
    assert!(!s.contains("1 Findings"), "{s}");
    assert!(s.contains("icanon") && !s.contains("-icanon"), "{s}");
    assert!(s.contains("echo") && !s.contains("-echo"), "{s}");
}

#[test]
fn a_file_that_does_not_load_fails_like_analyze() {
    let out = run(&["tui", "/nonexistent/trace.json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/trace.json"), "{err}");
}

#[test]
fn the_table_wraps_at_the_terminal_width_with_colour() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_tracehound");
    let trace = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    // The plain table, as a pipe gets it: its words are what the terminal must show.
    let plain = String::from_utf8(
        Command::new(bin)
            .args(["analyze", "--top", "3", trace.to_str().expect("UTF-8 path")])
            .output()
            .expect("runs")
            .stdout,
    )
    .expect("UTF-8");
    assert!(!plain.contains('\x1b'), "a pipe gets no colour");
    assert!(plain.lines().any(|l| l.chars().count() > 130));
    for width in [80usize, 120] {
        let script = format!(
            "COLUMNS={width} '{bin}' analyze --top 3 '{}'; echo DONE-DONE; sleep 60",
            trace.display()
        );
        let tmux = Tmux::start(
            format!("tracehound-wrap-{}-{width}", std::process::id()),
            width,
            200,
            &script,
        );
        tmux.wait_for("DONE-DONE");
        // The pane with its colour codes (-e), and the whole history.
        let coloured = tmux.cmd(&["capture-pane", "-p", "-e", "-S", "-", "-t", "t"]);
        // Bold red (tmux writes it back as two codes).
        assert!(coloured.contains("\x1b[31mhigh"), "{coloured}");
        let text = tmux.cmd(&["capture-pane", "-p", "-S", "-", "-t", "t"]);
        // Each line fits, so the terminal broke none: every token of the table is whole.
        for l in text.lines() {
            assert!(l.chars().count() <= width, "{width}: {l:?}");
        }
        let finding = "GPU 0 idle 82% of the window: 87 gaps ≥ 100 µs cost 356.6 ms";
        let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(joined.contains(finding), "{width}: {text}");
        // A number keeps its unit, and a sign its number, on one line.
        assert!(text.contains("≥ 100 µs"), "{width}: {text}");
        let top3: String = plain
            .lines()
            .take_while(|l| !l.contains("summary"))
            .collect::<Vec<_>>()
            .join(" ");
        // (A word longer than the terminal, such as a long path, can only be broken.)
        for word in top3
            .split_whitespace()
            .filter(|w| w.chars().count() < width)
            .take(200)
        {
            assert!(joined.contains(word), "{width}: {word:?} missing");
        }
    }
}
