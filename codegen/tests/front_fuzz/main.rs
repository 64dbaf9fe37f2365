//! A mutation fuzzer of the front end and the whole pipeline behind it, on
//! stable Rust (cargo-fuzz needs nightly): inputs are the corpus' kernels
//! and device functions mutated at the token level, or tokens at random
//! (`mutate.rs`), each run through what the macro and a program do with it
//! (`pipeline.rs`).
//!
//! Policy. A failure, which fails the test, is:
//! - a panic anywhere (the house rule: no panic on user input);
//! - a hang: an input that runs past [`INPUT_LIMIT`];
//! - a crash: a stack overflow (inputs run on a 2 MiB thread, the quarter
//!   of the compiler's 8 MiB stack the front is proven to fit in, see
//!   `front::nesting`), memory past [`MEMORY_LIMIT`], an abort;
//! - ptxas rejecting PTX, or naga rejecting WGSL, that the backends
//!   emitted without error; a definition that does not survive its JSON;
//! - an error of specialization, validation or a backend (an `Err` with a
//!   message) on input the front accepted: the front specializes and
//!   validates every variant of the tune space, so codegen must not refuse
//!   what it let through (issue 21).
//!
//! Isolation. A stack overflow or an allocation failure aborts the process,
//! and a hung input cannot be stopped in a thread, so the inputs run in a
//! child process (this test binary again, told so by
//! [`WORKER_ENV`]) that reports each input's start and end on its stdout;
//! the parent kills it past an input's time limit, and restarts it after
//! the input that killed it. Each input is a function of the run's seed and
//! its number, so the parent regenerates the input a report names.
//!
//! Budget. [`DEFAULT_SECONDS`] of fuzzing (`WARPFORGE_FUZZ_SECS`), then the
//! PTX still queued for ptxas, for [`PTXAS_GRACE`] at most; the seed comes
//! from the clock unless `WARPFORGE_FUZZ_SEED` gives it, and
//! `WARPFORGE_FUZZ_INPUT` runs one input of that seed alone (a reproducer).

#[path = "../common/mod.rs"]
mod common;
mod corpus;
mod mutate;
mod pipeline;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use corpus::Corpus;
use mutate::{generate, Input, Rng};

const DEFAULT_SECONDS: u64 = 60;
/// The longest one input may take, front and backends: the slowest corpus
/// kernel takes about a second in a debug build.
const INPUT_LIMIT: Duration = Duration::from_secs(20);
/// What the worker may allocate (address space, `ulimit -v` in KiB): an
/// input that needs more (an unroll or an array without bound) aborts it.
const MEMORY_LIMIT: u64 = 4 << 20;
/// The stack each input runs on.
const INPUT_STACK: usize = 2 << 20;
/// The PTX modules waiting for ptxas at most: ptxas assembles a few a
/// second (a GEMM variant takes seconds), slower than the worker emits, so
/// a module emitted while this many wait is counted and skipped.
const PTXAS_BACKLOG: usize = 8;
/// How long the PTX queued when the fuzzing ends may still take.
const PTXAS_GRACE: Duration = Duration::from_secs(20);
const PTXAS_LIMIT: Duration = Duration::from_secs(60);

const WORKER_ENV: &str = "WARPFORGE_FUZZ_WORKER";

/// Run without the test harness (`harness = false` in Cargo.toml), which
/// hides a passing test's output: the seed and the counts belong in the CI
/// log. The same binary is the worker when `WARPFORGE_FUZZ_WORKER` holds
/// its task. A failure panics, which fails the run.
fn main() {
    match std::env::var(WORKER_ENV) {
        Ok(task) => worker(&task),
        Err(_) => {
            every_corpus_kernel_builds();
            parent();
        }
    }
}

/// The corpus as read: each kernel is accepted and builds for every
/// target without error, so that the mutants start from working kernels
/// (a change to the reading of the files would otherwise leave the fuzzer
/// mutating fragments).
fn every_corpus_kernel_builds() {
    let corpus = Corpus::load();
    assert!(corpus.kernels.len() > 40 && corpus.devices.len() > 20);
    for seed in &corpus.kernels {
        let outcome = pipeline::run(&corpus, &Input::seed(seed), &mut Rng::new(0));
        assert!(
            outcome.accepted && outcome.failures.is_empty(),
            "{}: {:?}",
            Input::seed(seed),
            outcome.failures
        );
    }
}

/// What the worker is asked: the seed, the first input, how many, and
/// until when (milliseconds since the epoch) to start new ones.
struct Task {
    seed: u64,
    first: u64,
    count: u64,
    until_ms: u128,
}

impl Task {
    fn encode(&self) -> String {
        format!(
            "{} {} {} {}",
            self.seed, self.first, self.count, self.until_ms
        )
    }

    fn decode(text: &str) -> Task {
        let parts: Vec<&str> = text.split(' ').collect();
        Task {
            seed: parts[0].parse().unwrap(),
            first: parts[1].parse().unwrap(),
            count: parts[2].parse().unwrap(),
            until_ms: parts[3].parse().unwrap(),
        }
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// One line of the worker's report; messages escaped to stay on it.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => {}
            },
            (c, false) => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------- worker

/// The message of the last panic, for the report: the hook replaces the
/// default one, which would print each caught panic to stderr.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

fn worker(task: &str) {
    let task = Task::decode(task);
    std::panic::set_hook(Box::new(|info| {
        *LAST_PANIC.lock().unwrap() = Some(info.to_string());
    }));
    std::thread::Builder::new()
        .stack_size(INPUT_STACK)
        .spawn(move || run_inputs(&task))
        .unwrap()
        .join()
        .unwrap();
}

fn run_inputs(task: &Task) {
    let corpus = Corpus::load();
    let scratch = scratch_dir();
    let mut seen_ptx = HashSet::new();
    let mut out = std::io::stdout().lock();
    for index in task.first..task.first.saturating_add(task.count) {
        if now_ms() >= task.until_ms {
            break;
        }
        writeln!(out, "@begin {index}").unwrap();
        out.flush().unwrap();
        let input = generate(&corpus, task.seed, index);
        let mut rng = Rng::new(task.seed ^ index);
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pipeline::run(&corpus, &input, &mut rng)
        }));
        let outcome = match run {
            Ok(outcome) => outcome,
            Err(_) => {
                let message = LAST_PANIC.lock().unwrap().take().unwrap_or_default();
                writeln!(out, "@failure {index} panic: {}", escape(&message)).unwrap();
                writeln!(out, "@end {index} rejected 0").unwrap();
                continue;
            }
        };
        for message in &outcome.failures {
            writeln!(out, "@failure {index} {}", escape(message)).unwrap();
        }
        for (n, (arch, text)) in outcome.ptx.iter().enumerate() {
            // Mutants often emit the PTX of their seed again.
            if !seen_ptx.insert(text.clone()) {
                continue;
            }
            let path = scratch.join(format!("{}-{index}-{n}.{}.ptx", task.seed, arch.name()));
            std::fs::write(&path, text).unwrap();
            writeln!(out, "@ptx {index} {} {}", arch.name(), path.display()).unwrap();
        }
        let verdict = if outcome.accepted {
            "accepted"
        } else {
            "rejected"
        };
        writeln!(out, "@end {index} {verdict} {}", outcome.built).unwrap();
        out.flush().unwrap();
    }
    writeln!(out, "@done").unwrap();
}

fn scratch_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("front_fuzz");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---------------------------------------------------------------- parent

/// A failure with what reproduces it.
struct Failure {
    index: u64,
    message: String,
}

#[derive(Default)]
struct Counts {
    inputs: u64,
    accepted: u64,
    rejected: u64,
    built: u64,
    /// The input that took longest and how long, against [`INPUT_LIMIT`].
    slowest: (u64, Duration),
    failures: Vec<Failure>,
}

fn parent() {
    let seed = match std::env::var("WARPFORGE_FUZZ_SEED") {
        Ok(seed) => seed.parse().expect("WARPFORGE_FUZZ_SEED is a number"),
        Err(_) => now_ms() as u64,
    };
    let only: Option<u64> = std::env::var("WARPFORGE_FUZZ_INPUT")
        .ok()
        .map(|i| i.parse().expect("WARPFORGE_FUZZ_INPUT is a number"));
    let seconds = std::env::var("WARPFORGE_FUZZ_SECS")
        .map(|s| s.parse().expect("WARPFORGE_FUZZ_SECS is a number"))
        .unwrap_or(DEFAULT_SECONDS);
    let ptxas = common::ptxas::find_ptxas();
    match only {
        Some(index) => println!("front fuzz: seed {seed}, input {index} alone"),
        None => println!(
            "front fuzz: seed {seed} (WARPFORGE_FUZZ_SEED={seed} repeats this run), {seconds} s"
        ),
    }

    let started = Instant::now();
    let until_ms = now_ms() + u128::from(seconds) * 1000;
    let (send, ptx_queue) = mpsc::channel();
    let mut ptx_jobs = PtxJobs {
        send,
        waiting: Arc::new(AtomicUsize::new(0)),
        skipped: 0,
    };
    let waiting = ptx_jobs.waiting.clone();
    let ptx_deadline = started + Duration::from_secs(seconds) + PTXAS_GRACE;
    let assembler = std::thread::spawn(move || assemble(&ptxas, ptx_queue, &waiting, ptx_deadline));

    let mut counts = Counts::default();
    let (mut next, count) = match only {
        Some(index) => (index, 1),
        None => (0, u64::MAX),
    };
    loop {
        let task = Task {
            seed,
            first: next,
            count: count - (next - only.unwrap_or(0)),
            until_ms: if only.is_some() { u128::MAX } else { until_ms },
        };
        match run_worker(&task, &mut counts, &mut ptx_jobs) {
            WorkerEnd::Done => break,
            WorkerEnd::Lost(index) => {
                next = index + 1;
                if only.is_some() {
                    break;
                }
            }
        }
    }
    let busy = ptx_jobs.skipped;
    drop(ptx_jobs);
    let (assembled, late, ptx_failures) = assembler.join().unwrap();
    counts.failures.extend(ptx_failures);
    report(seed, started, &counts, assembled, busy + late);
    let corpus = Corpus::load();
    for failure in &counts.failures {
        eprintln!(
            "\nFAILURE on input {} (reproduce: WARPFORGE_FUZZ_SEED={seed} WARPFORGE_FUZZ_INPUT={} \
             cargo test -p warpforge-codegen --test front_fuzz):\n{}\n--- input ---\n{}",
            failure.index,
            failure.index,
            failure.message,
            generate(&corpus, seed, failure.index)
        );
    }
    assert!(
        counts.failures.is_empty(),
        "{} failure(s), each above with its input",
        counts.failures.len()
    );
}

/// One PTX module for ptxas: the input, the arch, the file.
type PtxJob = (u64, String, PathBuf);

/// The queue to the ptxas thread, [`PTXAS_BACKLOG`] long at most.
struct PtxJobs {
    send: mpsc::Sender<PtxJob>,
    waiting: Arc<AtomicUsize>,
    skipped: u64,
}

impl PtxJobs {
    fn push(&mut self, job: PtxJob) {
        if self.waiting.load(Ordering::SeqCst) >= PTXAS_BACKLOG {
            self.skipped += 1;
            std::fs::remove_file(&job.2).ok();
            return;
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        self.send.send(job).unwrap();
    }
}

enum WorkerEnd {
    /// Its budget or its inputs ran out.
    Done,
    /// It hung or died on this input.
    Lost(u64),
}

fn run_worker(task: &Task, counts: &mut Counts, ptx_jobs: &mut PtxJobs) -> WorkerEnd {
    let mut child = spawn_worker(task);
    let lines = lines_of(child.stdout.take().unwrap());
    let stderr = tail_of(child.stderr.take().unwrap());
    let mut current = None;
    let mut begun = Instant::now();
    loop {
        let line = match lines.recv_timeout(INPUT_LIMIT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                // Killed by its id: a child this test started.
                child.kill().unwrap();
                child.wait().unwrap();
                let index = current.expect("a worker hangs on an input");
                counts.failures.push(Failure {
                    index,
                    message: format!("hang: no result within {INPUT_LIMIT:?}"),
                });
                return WorkerEnd::Lost(index);
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = child.wait().unwrap();
                let stderr = stderr.lock().unwrap().clone();
                let Some(index) = current else {
                    panic!("the fuzz worker exited ({status}) outside any input:\n{stderr}");
                };
                counts.failures.push(Failure {
                    index,
                    message: format!("crash: the worker died ({status}):\n{stderr}"),
                });
                return WorkerEnd::Lost(index);
            }
        };
        let mut words = line.splitn(3, ' ');
        let tag = words.next().unwrap();
        let index: u64 = words.next().and_then(|i| i.parse().ok()).unwrap_or(0);
        let rest = words.next().unwrap_or("");
        match tag {
            "@begin" => {
                current = Some(index);
                begun = Instant::now();
                counts.inputs += 1;
            }
            "@end" => {
                current = None;
                if begun.elapsed() > counts.slowest.1 {
                    counts.slowest = (index, begun.elapsed());
                }
                let mut parts = rest.split(' ');
                if parts.next() == Some("accepted") {
                    counts.accepted += 1;
                } else {
                    counts.rejected += 1;
                }
                counts.built += parts.next().and_then(|b| b.parse().ok()).unwrap_or(0);
            }
            "@failure" => counts.failures.push(Failure {
                index,
                message: unescape(rest),
            }),
            "@ptx" => {
                let (arch, path) = rest.split_once(' ').unwrap();
                ptx_jobs.push((index, arch.to_string(), path.into()));
            }
            "@done" => {
                child.wait().unwrap();
                return WorkerEnd::Done;
            }
            // Anything else the worker printed.
            _ => {}
        }
    }
}

/// This test binary as the worker, under the memory limit.
fn spawn_worker(task: &Task) -> Child {
    let exe = std::env::current_exe().unwrap();
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_LIMIT} && exec \"$0\" \"$@\""))
        .arg(exe)
        .env(WORKER_ENV, task.encode())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the fuzz worker starts")
}

fn lines_of(stdout: impl Read + Send + 'static) -> Receiver<String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// The last few KiB of the worker's stderr (an abort's message).
fn tail_of(mut stderr: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    const KEEP: usize = 4096;
    let tail = Arc::new(Mutex::new(String::new()));
    let sink = tail.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = stderr.read(&mut buf) {
            let mut tail = sink.lock().unwrap();
            tail.push_str(&String::from_utf8_lossy(&buf[..n]));
            if tail.len() > KEEP {
                let cut = tail.len() - KEEP;
                let cut = (cut..tail.len())
                    .find(|&i| tail.is_char_boundary(i))
                    .unwrap();
                tail.drain(..cut);
            }
        }
    });
    tail
}

/// Assembles each PTX file queued, until the queue closes or the deadline
/// passes: (assembled, skipped, failures).
fn assemble(
    ptxas: &Path,
    queue: Receiver<PtxJob>,
    waiting: &AtomicUsize,
    deadline: Instant,
) -> (u64, u64, Vec<Failure>) {
    let (mut assembled, mut skipped, mut failures) = (0, 0, Vec::new());
    for (index, arch, path) in queue {
        waiting.fetch_sub(1, Ordering::SeqCst);
        if Instant::now() >= deadline {
            skipped += 1;
            std::fs::remove_file(&path).ok();
            continue;
        }
        // `-O0`: the PTX is checked as at `-O3` (parsed, typed, its
        // registers allocated) in half the time; the optimizer is ptxas' own.
        let mut child = Command::new(ptxas)
            .arg(format!("-arch={arch}"))
            .arg("-O0")
            .arg(&path)
            .args(["-o", "/dev/null"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ptxas starts");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > PTXAS_LIMIT {
                child.kill().unwrap();
                child.wait().unwrap();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut errors = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut errors)
            .unwrap();
        match status {
            Some(status) if status.success() => {
                assembled += 1;
                std::fs::remove_file(&path).ok();
            }
            _ => failures.push(Failure {
                index,
                message: format!(
                    "ptxas -arch={arch} -O0 rejects the PTX the backend emitted ({}):\n{errors}",
                    path.display()
                ),
            }),
        }
    }
    (assembled, skipped, failures)
}

fn report(seed: u64, started: Instant, counts: &Counts, assembled: u64, skipped: u64) {
    println!(
        "front fuzz: seed {seed}, {:.1} s: {} inputs, {} accepted, {} rejected by the front, \
         {} variant builds, {} PTX modules assembled and {} not \
         (ptxas busy), {} failures; the slowest input, {}, took {:.2} s (limit {INPUT_LIMIT:?})",
        started.elapsed().as_secs_f64(),
        counts.inputs,
        counts.accepted,
        counts.rejected,
        counts.built,
        assembled,
        skipped,
        counts.failures.len(),
        counts.slowest.0,
        counts.slowest.1.as_secs_f64()
    );
}
