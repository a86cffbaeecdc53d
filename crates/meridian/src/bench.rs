//! `meridian bench` and `meridian gen`: the command-line side of the
//! `meridian-bench` crate.

// A load generator's work is measuring time: it reads the clock directly.
#![allow(clippy::disallowed_methods)]

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand, ValueEnum};
use meridian_bench::generate::{self, EntryTemplate, Format, Model};
use meridian_bench::overrides::Sweep;
use meridian_bench::report::Report;
use meridian_bench::run::{self, Options, RunResult};
use meridian_bench::scenario::Scenario;
use meridian_bench::{canned, capacity, procstat};

/// `meridian bench ...`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Run a scenario file against one server.
    Run(RunArgs),
    /// Run one scenario against several servers and set them side by side.
    Compare(CompareArgs),
    /// Seed 003's capacity model: CPU per operation at several rates, users at 80 % CPU.
    Capacity(CapacityArgs),
    /// Measure the client's own ceiling against an in-process canned-response server.
    Ceiling(CeilingArgs),
    /// Serve canned responses (a server that costs nothing, for client measurements).
    Canned(CannedArgs),
    /// Persistent-search consumers: count the changes a server delivers to each.
    Followers(FollowersArgs),
}

#[derive(Debug, Args)]
struct FollowersArgs {
    /// Server URL (ldap://HOST:PORT).
    #[arg(long, default_value = "ldap://127.0.0.1:3389")]
    url: String,
    /// Bind DN of every consumer.
    #[arg(short = 'D', long, default_value = "cn=admin,dc=example,dc=com")]
    bind_dn: String,
    /// Its password.
    #[arg(short = 'w', long)]
    password: String,
    /// The subtree followed.
    #[arg(long, default_value = "dc=example,dc=com")]
    base: String,
    /// Consumers (connections, one persistent search each).
    #[arg(long, default_value_t = 1)]
    consumers: usize,
    /// Seconds to count.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
}

/// Settings that override the scenario file.
#[derive(Debug, Args)]
struct Overrides {
    /// Server URL (ldap://HOST:PORT or ldaps://HOST:PORT).
    #[arg(long)]
    url: Option<String>,
    /// ldaps://: PEM file of the CA certificates to trust.
    #[arg(long)]
    tls_ca_file: Option<String>,
    /// ldaps://: accept any server certificate (test servers only).
    #[arg(long)]
    tls_insecure: bool,
    /// Bind DN of every session.
    #[arg(short = 'D', long)]
    bind_dn: Option<String>,
    /// Its password.
    #[arg(short = 'w', long)]
    password: Option<String>,
    /// Sessions (connections).
    #[arg(long)]
    sessions: Option<u32>,
    /// Outstanding requests per session.
    #[arg(long)]
    depth: Option<u32>,
    /// Measured seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Warm-up seconds.
    #[arg(long)]
    warmup: Option<f64>,
    /// Stop after this many operations.
    #[arg(long)]
    count: Option<u64>,
    /// Open loop: operations per second in total.
    #[arg(long)]
    rate: Option<f64>,
    /// User profile: simulated users.
    #[arg(long)]
    users: Option<u64>,
    /// Client threads (0: one per CPU).
    #[arg(long)]
    threads: Option<usize>,
    /// Local server process to read CPU and memory from.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Largest key (keys.max).
    #[arg(long)]
    keys: Option<u64>,
}

/// Where reports go.
#[derive(Debug, Args)]
struct Outputs {
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the HTML report (with SVG charts) here.
    #[arg(long)]
    html: Option<PathBuf>,
    /// No progress line.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The scenario (TOML).
    scenario: PathBuf,
    #[command(flatten)]
    overrides: Overrides,
    /// Run once per value: `sessions=1,8,32,128`, `depth=1,10,100` or
    /// `rate=1000,2000,4000` (open loop).
    #[arg(long)]
    sweep: Option<String>,
    #[command(flatten)]
    outputs: Outputs,
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// The scenario (TOML).
    scenario: PathBuf,
    /// A server as NAME=ldap://HOST:PORT (repeat).
    #[arg(long = "server", required = true)]
    servers: Vec<String>,
    #[command(flatten)]
    overrides: Overrides,
    #[command(flatten)]
    outputs: Outputs,
}

#[derive(Debug, Args)]
struct CapacityArgs {
    /// The scenario (TOML) with a user profile (`per_user` rates).
    scenario: PathBuf,
    #[command(flatten)]
    overrides: Overrides,
    #[command(flatten)]
    outputs: Outputs,
}

#[derive(Debug, Args)]
struct CeilingArgs {
    /// Seconds to measure.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Sessions.
    #[arg(long, default_value_t = 4)]
    sessions: u32,
    /// Outstanding requests per session.
    #[arg(long, default_value_t = 1000)]
    depth: u32,
    /// Operation sent: a base search or a modify of seed 000.
    #[arg(long, value_enum, default_value_t = CeilingOp::Search)]
    op: CeilingOp,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum CeilingOp {
    Search,
    Modify,
}

#[derive(Debug, Args)]
struct CannedArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3899")]
    listen: String,
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Run(args) => run_scenario(args),
        BenchCommand::Compare(args) => compare(args),
        BenchCommand::Capacity(args) => capacity(args),
        BenchCommand::Ceiling(args) => ceiling(&args),
        BenchCommand::Followers(args) => {
            let delivered =
                meridian_bench::followers::run(&meridian_bench::followers::Followers {
                    url: args.url,
                    bind_dn: args.bind_dn,
                    password: args.password,
                    base: args.base,
                    consumers: args.consumers,
                    duration: std::time::Duration::from_secs_f64(args.duration),
                })?;
            let least = delivered.per_consumer.iter().min().copied().unwrap_or(0);
            let most = delivered.per_consumer.iter().max().copied().unwrap_or(0);
            println!(
                "{} consumers: {:.0} changes/s delivered in all ({:.0}/s each, least {least}, most {most} in {:.1} s); {} ended by the server",
                args.consumers,
                delivered.total_rate(),
                delivered.total_rate() / args.consumers.max(1) as f64,
                delivered.seconds,
                delivered.ended
            );
            Ok(())
        }
        BenchCommand::Canned(args) => {
            let listener = TcpListener::bind(&args.listen)
                .with_context(|| format!("cannot listen on {}", args.listen))?;
            eprintln!("canned-response server on {}", listener.local_addr()?);
            canned::serve(
                &listener,
                &Arc::new(AtomicBool::new(false)),
                &Arc::default(),
            );
            Ok(())
        }
    }
}

fn load(path: &Path, overrides: &Overrides) -> anyhow::Result<Scenario> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut scenario =
        Scenario::parse(&text, &path.display().to_string()).map_err(anyhow::Error::msg)?;
    let o = overrides;
    meridian_bench::overrides::Overrides {
        url: o.url.clone(),
        bind_dn: o.bind_dn.clone(),
        password: o.password.clone(),
        tls_ca_file: o.tls_ca_file.clone(),
        tls_insecure: o.tls_insecure,
        sessions: o.sessions,
        depth: o.depth,
        duration_secs: o.duration,
        warmup_secs: o.warmup,
        count: o.count,
        rate: o.rate,
        users: o.users,
        threads: o.threads,
        server_pid: o.server_pid,
        keys_max: o.keys,
        distribution: None,
    }
    .apply(&mut scenario)
    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(scenario)
}

fn finish(report: &Report, outputs: &Outputs) -> anyhow::Result<()> {
    print!("{}", report.to_text());
    if let Some(path) = &outputs.json {
        std::fs::write(path, report.to_json())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &outputs.html {
        std::fs::write(path, report.to_html())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn report(kind: &str, scenario: &Scenario, runs: Vec<RunResult>) -> Report {
    Report {
        kind: kind.into(),
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        runs,
        capacity: None,
    }
}

fn run_scenario(args: RunArgs) -> anyhow::Result<()> {
    let scenario = load(&args.scenario, &args.overrides)?;
    let options = Options {
        quiet: args.outputs.quiet,
        live: None,
    };
    let Some(sweep) = &args.sweep else {
        let result = run::run(&scenario, "", options.clone())?;
        return finish(&report("run", &scenario, vec![result]), &args.outputs);
    };
    let sweep = Sweep::parse(sweep).map_err(|e| anyhow::anyhow!("--{e}"))?;
    let mut runs = Vec::new();
    for (label, one) in sweep.runs(&scenario).map_err(anyhow::Error::msg)? {
        runs.push(run::run(&one, &label, options.clone())?);
    }
    finish(&report("sweep", &scenario, runs), &args.outputs)
}

fn compare(args: CompareArgs) -> anyhow::Result<()> {
    let scenario = load(&args.scenario, &args.overrides)?;
    let options = Options {
        quiet: args.outputs.quiet,
        live: None,
    };
    let mut runs = Vec::new();
    for server in &args.servers {
        let (name, url) = server
            .split_once('=')
            .with_context(|| format!("--server {server:?}: expected NAME=ldap://HOST:PORT"))?;
        let mut one = scenario.clone();
        one.target.url = url.to_owned();
        runs.push(run::run(&one, name, options.clone()).with_context(|| format!("server {name}"))?);
    }
    let report = report("compare", &scenario, runs);
    finish(&report, &args.outputs)?;
    if let [first, rest @ ..] = report.runs.as_slice() {
        for other in rest {
            println!(
                "{} / {}: {:.2}x the throughput",
                other.label,
                first.label,
                other.total.rate / first.total.rate.max(1e-9)
            );
        }
    }
    Ok(())
}

fn capacity(args: CapacityArgs) -> anyhow::Result<()> {
    let scenario = load(&args.scenario, &args.overrides)?;
    let pid = scenario.load.server_pid.context(
        "the capacity model reads the server's CPU time: give --server-pid (or load.server_pid)",
    )?;
    let (runs, model) = capacity::measure(
        &scenario,
        pid,
        Options {
            quiet: args.outputs.quiet,
            live: None,
        },
    )?;
    let mut report = report("capacity", &scenario, runs);
    report.capacity = Some(model);
    finish(&report, &args.outputs)
}

/// Runs the client against the canned server in this process and reports
/// operations per second of client CPU time.
fn ceiling(args: &CeilingArgs) -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let canned_stats = Arc::new(canned::CannedStats::default());
    let server = {
        let (stop, stats) = (Arc::clone(&stop), Arc::clone(&canned_stats));
        std::thread::spawn(move || canned::serve(&listener, &stop, &stats))
    };
    let operation = match args.op {
        CeilingOp::Search => {
            "kind = \"search\"\ndn = \"uid=user{key},ou=People,dc=example,dc=com\"\nattributes = [\"carLicense\"]\n"
        }
        CeilingOp::Modify => {
            "kind = \"modify\"\ndn = \"uid=user{key},ou=People,dc=example,dc=com\"\n\
             changes = [{ type = \"replace\", attribute = \"carLicense\", values = [\"{unique}\"] }]\n"
        }
    };
    let text = format!(
        "name = \"client ceiling\"\n[target]\nurl = \"ldap://{address}\"\n[load]\nsessions = {}\ndepth = {}\n\
         threads = 1\nduration_secs = {}\nwarmup_secs = 1\n[keys]\ndistribution = \"array\"\nmax = 999999\n\
         [[operation]]\n{operation}",
        args.sessions, args.depth, args.seconds
    );
    let scenario = Scenario::parse(&text, "ceiling").map_err(anyhow::Error::msg)?;
    let process_cpu = || procstat::cpu_seconds(std::process::id()).unwrap_or(0.0);
    let started = Instant::now();
    let before = process_cpu();
    let result = run::run(
        &scenario,
        "ceiling",
        Options {
            quiet: true,
            live: None,
        },
    )?;
    stop.store(true, Ordering::Relaxed);
    let _ = std::net::TcpStream::connect(address);
    let _ = server.join();
    // Connection threads report their CPU as they end, which is when the
    // client has closed its sessions; give them a moment.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let server_seconds = canned_stats.cpu_us.load(Ordering::Relaxed) as f64 / 1e6;
    let client_seconds = process_cpu() - before - server_seconds;
    print!(
        "{}",
        report("run", &scenario, vec![result.clone()]).to_text()
    );
    println!(
        "client ceiling: {:.0} operations/s on one client thread; client CPU {:.2} s (with warm-up), canned server CPU {:.2} s over {:.1} s: {:.0} operations per client CPU second",
        result.total.rate,
        client_seconds,
        server_seconds,
        started.elapsed().as_secs_f64(),
        result.total.count as f64 / client_seconds.max(1e-9),
    );
    std::io::stdout().flush()?;
    Ok(())
}

/// `meridian gen`.
#[derive(Debug, Args)]
pub(crate) struct GenArgs {
    /// A built-in model: seed000, seed002 or seed003.
    #[arg(long, conflicts_with = "template")]
    model: Option<String>,
    /// An entry template file (LDIF-shaped, values with placeholders).
    #[arg(long)]
    template: Option<PathBuf>,
    /// Entries to generate.
    #[arg(short = 'n', long)]
    count: u64,
    /// First sequence number.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Suffix the models live under.
    #[arg(long, default_value = "dc=example,dc=com")]
    suffix: String,
    /// Do not write the suffix and container entries first (models only).
    #[arg(long)]
    no_containers: bool,
    /// Output: a file, a FIFO or `-`; repeat for parallel streams.
    #[arg(short = 'o', long = "output", default_value = "-")]
    outputs: Vec<PathBuf>,
    /// ldif or ber (LDAPMessage AddRequests).
    #[arg(long, value_enum, default_value_t = GenFormat::Ldif)]
    format: GenFormat,
    /// Seed of the random parts.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum GenFormat {
    Ldif,
    Ber,
}

pub(crate) fn generate(args: GenArgs) -> anyhow::Result<()> {
    let (template, containers) = match (&args.model, &args.template) {
        (Some(name), None) => {
            let model = Model::from_name(name).with_context(|| {
                format!("--model {name:?}: known models are seed000, seed002, seed003")
            })?;
            let containers = if args.no_containers {
                Vec::new()
            } else {
                model.containers(&args.suffix)
            };
            (
                EntryTemplate::parse(&model.template(&args.suffix))?,
                containers,
            )
        }
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            (
                EntryTemplate::parse(&text).with_context(|| path.display().to_string())?,
                Vec::new(),
            )
        }
        _ => bail!("give --model NAME or --template FILE"),
    };
    if args.outputs.iter().filter(|p| p.as_os_str() == "-").count() > 0 && args.outputs.len() > 1 {
        bail!("`-` (standard output) cannot be one of several outputs");
    }
    let started = Instant::now();
    let written = generate::generate(&generate::Plan {
        template,
        containers,
        count: args.count,
        start: args.start,
        outputs: args.outputs.clone(),
        format: match args.format {
            GenFormat::Ldif => Format::Ldif,
            GenFormat::Ber => Format::Ber,
        },
        seed: args.seed,
    })?;
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "meridian gen: {written} entries in {seconds:.2} s ({:.0} entries/s) to {} output(s)",
        written as f64 / seconds.max(1e-9),
        args.outputs.len()
    );
    Ok(())
}
