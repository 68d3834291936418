//! `shardhost-sim [N] [--seed S] [-v]`: runs N schedules (seeds S, S+1, ...; a random start
//! seed when none is given) on every core, one thread and one current-thread runtime per
//! schedule, prints every violation with the command that replays it, and ends with one line:
//! `N schedules, F faults, R records, V violations` (exit 1 on any violation).

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use shardhost_sim::{Report, replay_command, run};

struct Args {
    count: u64,
    seed: Option<u64>,
    verbose: bool,
}

fn usage() -> ExitCode {
    eprintln!("usage: shardhost-sim [N] [--seed S] [-v]");
    ExitCode::from(2)
}

fn parse() -> Option<Args> {
    let mut args = Args {
        count: 1,
        seed: None,
        verbose: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seed" => args.seed = Some(it.next()?.parse().ok()?),
            "-v" | "--verbose" => args.verbose = true,
            n => args.count = n.parse().ok()?,
        }
    }
    Some(args)
}

fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // Small enough to type back.
    shardhost_sim::rng::Rng::new(t ^ u64::from(std::process::id())).below(1 << 40)
}

fn main() -> ExitCode {
    let Some(args) = parse() else {
        return usage();
    };
    if let Ok(filter) = std::env::var("SHARDHOST_SIM_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .without_time()
            .with_ansi(false)
            .init();
    }
    let start = args.seed.unwrap_or_else(|| {
        let s = random_seed();
        println!("start seed {s}");
        s
    });
    let (faults, records, violations) = run_all(start, args.count, args.verbose);
    println!(
        "{} schedules, {faults} faults, {records} records, {violations} violations",
        args.count
    );
    if violations > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs seeds `start..start + count` on every core, one thread (and one current-thread runtime)
/// per schedule at a time; prints each report as it comes; answers the totals (faults,
/// records, violations).
fn run_all(start: u64, count: u64, verbose: bool) -> (u64, u64, u64) {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(count.max(1) as usize);
    let next = AtomicU64::new(0);
    let (tx, rx) = mpsc::channel::<Report>();
    let mut totals = (0, 0, 0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (tx, next) = (tx.clone(), &next);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let seed = start.wrapping_add(i);
                    if tx.send(run_one(seed, verbose)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for report in rx {
            print_report(&report, verbose);
            totals.0 += report.faults;
            totals.1 += report.records;
            totals.2 += report.violations.len() as u64;
        }
    });
    totals
}

/// One schedule; a panic of the simulation itself is a violation too.
fn run_one(seed: u64, verbose: bool) -> Report {
    std::panic::catch_unwind(|| run(seed, verbose)).unwrap_or_else(|_| Report {
        seed,
        faults: 0,
        records: 0,
        violations: vec![shardhost_sim::Violation {
            check: "sim-panicked",
            seed,
            message: "the simulation panicked (see above)".into(),
        }],
        trace: Vec::new(),
        virtual_time: Default::default(),
    })
}

fn print_report(report: &Report, verbose: bool) {
    for line in &report.trace {
        println!("{line}");
    }
    if verbose {
        println!(
            "seed {}: {:?} of virtual time, {} faults, {} records",
            report.seed, report.virtual_time, report.faults, report.records
        );
    }
    let params = shardhost_sim::Params::draw(report.seed);
    for v in &report.violations {
        match shardhost_sim::known_defect(&params, v) {
            Some(d) => println!("VIOLATION {v}\n  (known defect, being fixed: {})", d.name),
            None => println!("VIOLATION {v}"),
        }
    }
    if !report.violations.is_empty() {
        println!("  replay: {}", replay_command(report.seed));
    }
}
