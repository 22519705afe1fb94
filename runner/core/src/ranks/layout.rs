//! A process's place among the ranks, read from its launcher's environment:
//! torchrun (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, …), Slurm's `srun`
//! (`SLURM_PROCID`, `SLURM_LOCALID`, `SLURM_NTASKS`, …) or `RANK` and
//! `WORLD_SIZE` set by hand; the master's address from `MASTER_ADDR`, a flag
//! or the first host of `SLURM_JOB_NODELIST`.

use stallscope_bundle::RankLayout;

/// The synchronisation every layout records (`RankLayout::sync`).
pub const SYNC: &str = "tcpstore_barrier";
/// The master port when neither `MASTER_PORT` nor a flag gives one and no
/// Slurm job id derives one (c10d's default).
pub const DEFAULT_PORT: u16 = 29500;

/// A launcher's variable that is missing or malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}={value:?}: {expected}")]
pub struct LayoutError {
    pub variable: String,
    pub value: String,
    pub expected: String,
}

/// What the command line says about the master (flags win over variables).
#[derive(Debug, Clone, Default)]
pub struct MasterFlags {
    pub addr: Option<String>,
    pub port: Option<u16>,
}

fn err(variable: &str, value: &str, expected: impl Into<String>) -> LayoutError {
    LayoutError {
        variable: variable.into(),
        value: value.into(),
        expected: expected.into(),
    }
}

/// The layout the environment `get` describes, or `None` for one process:
/// no launcher started it (no `RANK`/`WORLD_SIZE`, no `SLURM_PROCID`/
/// `SLURM_NTASKS`), the world has one rank, or `STALLSCOPE_RANKS=off`.
pub fn from_env(
    get: &dyn Fn(&str) -> Option<String>,
    flags: &MasterFlags,
) -> Result<Option<RankLayout>, LayoutError> {
    let vars = Vars { get };
    let mut layout = if let (Some(rank), Some(world)) = (vars.num("RANK")?, vars.num("WORLD_SIZE")?)
    {
        env_layout(&vars, rank, world)?
    } else if let (Some(rank), Some(world)) = (vars.num("SLURM_PROCID")?, vars.num("SLURM_NTASKS")?)
    {
        slurm_layout(&vars, rank, world)?
    } else {
        return Ok(None);
    };
    if layout.world_size == 0 {
        let var = if layout.launcher == "slurm" {
            "SLURM_NTASKS"
        } else {
            "WORLD_SIZE"
        };
        return Err(err(var, "0", "expected at least 1 rank"));
    }
    if layout.world_size == 1 || get("STALLSCOPE_RANKS").is_some_and(|v| v == "off") {
        return Ok(None);
    }
    if layout.rank >= layout.world_size {
        let var = if layout.launcher == "slurm" {
            "SLURM_PROCID"
        } else {
            "RANK"
        };
        return Err(err(
            var,
            &layout.rank.to_string(),
            format!("expected a rank below the world size {}", layout.world_size),
        ));
    }
    if let Some(a) = &flags.addr {
        layout.master_addr = a.clone();
    }
    if let Some(p) = flags.port {
        layout.master_port = p;
    }
    layout.sync = SYNC.into();
    Ok(Some(layout))
}

/// A launcher's environment, read through `get`, its numbers parsed.
struct Vars<'a> {
    get: &'a dyn Fn(&str) -> Option<String>,
}

impl Vars<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.get)(name)
    }

    /// A whole number, or `None` when the variable is not set.
    fn num(&self, name: &str) -> Result<Option<u32>, LayoutError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<u32>()
                .map(Some)
                .map_err(|_| err(name, &v, "expected a whole number")),
        }
    }

    /// `MASTER_PORT`, or `None` when it is not set.
    fn port(&self) -> Result<Option<u16>, LayoutError> {
        match self.get("MASTER_PORT") {
            None => Ok(None),
            Some(v) => match v.trim().parse::<u16>() {
                Ok(p) if p > 0 => Ok(Some(p)),
                _ => Err(err("MASTER_PORT", &v, "expected a port from 1 to 65535")),
            },
        }
    }
}

/// The layout torchrun (or `RANK` and `WORLD_SIZE` set by hand) describes.
fn env_layout(vars: &Vars, rank: u32, world: u32) -> Result<RankLayout, LayoutError> {
    let torchrun = vars.get("TORCHELASTIC_RUN_ID").is_some();
    let run_id = vars.get("TORCHELASTIC_RUN_ID").filter(|id| id != "none");
    Ok(RankLayout {
        launcher: if torchrun { "torchrun" } else { "env" }.into(),
        rank,
        world_size: world,
        local_rank: vars.num("LOCAL_RANK")?.unwrap_or(rank),
        local_world_size: vars.num("LOCAL_WORLD_SIZE")?,
        node: vars.num("GROUP_RANK")?,
        job_id: vars.get("SLURM_JOB_ID").or(run_id),
        master_addr: vars
            .get("MASTER_ADDR")
            .unwrap_or_else(|| "127.0.0.1".into()),
        master_port: vars.port()?.unwrap_or(DEFAULT_PORT),
        ..RankLayout::default()
    })
}

/// The layout Slurm's `srun` describes; the master is `MASTER_ADDR`, else
/// the job's first host, and the port derives from the job id.
fn slurm_layout(vars: &Vars, rank: u32, world: u32) -> Result<RankLayout, LayoutError> {
    let job_id = vars.get("SLURM_JOB_ID");
    let master_addr = match (vars.get("MASTER_ADDR"), vars.get("SLURM_JOB_NODELIST")) {
        (Some(a), _) => a,
        (None, Some(list)) => {
            first_host(&list).map_err(|why| err("SLURM_JOB_NODELIST", &list, why))?
        }
        (None, None) => "127.0.0.1".into(),
    };
    let derived = job_id
        .as_deref()
        .and_then(|j| j.trim().parse::<u64>().ok())
        .map(port_from_job_id);
    Ok(RankLayout {
        launcher: "slurm".into(),
        rank,
        world_size: world,
        local_rank: vars.num("SLURM_LOCALID")?.unwrap_or(0),
        local_world_size: vars
            .num("SLURM_NTASKS_PER_NODE")
            .ok()
            .flatten()
            .or(vars.num("SLURM_TASKS_PER_NODE").ok().flatten()),
        node: vars.num("SLURM_NODEID")?,
        job_id,
        master_addr,
        master_port: vars.port()?.or(derived).unwrap_or(DEFAULT_PORT),
        ..RankLayout::default()
    })
}

/// A master port derived from a Slurm job id, so two jobs sharing a node
/// do not collide: 20000 + (id mod 10000), as common sbatch recipes do.
pub fn port_from_job_id(job_id: u64) -> u16 {
    20_000 + (job_id % 10_000) as u16
}

/// The first host of a Slurm host list: `node[01-04],gpu7` → `node01`,
/// `rack[2-3]-n[07,09]` → `rack2-n07`. Brackets hold comma-separated
/// numbers or ranges; the first number keeps its zero padding.
pub fn first_host(list: &str) -> Result<String, String> {
    let mut depth = 0usize;
    let mut end = list.len();
    for (i, ch) in list.char_indices() {
        match ch {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1).ok_or("a ']' without its '['")?,
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let item = list[..end].trim();
    let mut host = String::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        host.push_str(&rest[..open]);
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or("a '[' without its ']'")?;
        let inner = &rest[open + 1..close];
        let first = inner
            .split(',')
            .next()
            .unwrap_or("")
            .split('-')
            .next()
            .unwrap_or("");
        if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "[{inner}]: expected numbers or ranges such as [01-04,07]"
            ));
        }
        host.push_str(first);
        rest = &rest[close + 1..];
    }
    if rest.contains(']') {
        return Err("a ']' without its '['".into());
    }
    host.push_str(rest);
    if host.is_empty() {
        return Err("expected at least one host name, e.g. node[01-04]".into());
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn torchrun_variables_make_a_torchrun_layout() {
        let e = env(&[
            ("RANK", "3"),
            ("LOCAL_RANK", "1"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_WORLD_SIZE", "2"),
            ("GROUP_RANK", "1"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29600"),
            ("TORCHELASTIC_RUN_ID", "none"),
        ]);
        let l = from_env(&e, &MasterFlags::default()).unwrap().unwrap();
        assert_eq!(
            (l.launcher.as_str(), l.rank, l.world_size, l.local_rank),
            ("torchrun", 3, 4, 1)
        );
        assert_eq!(
            (l.local_world_size, l.node, l.job_id),
            (Some(2), Some(1), None)
        );
        assert_eq!((l.master_addr.as_str(), l.master_port), ("10.0.0.1", 29600));
        assert_eq!(l.sync, SYNC);
    }

    #[test]
    fn slurm_variables_take_the_first_node_and_a_port_from_the_job() {
        let e = env(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_NODEID", "2"),
            ("SLURM_JOB_ID", "123456"),
            ("SLURM_JOB_NODELIST", "node[01-04],gpu7"),
        ]);
        let l = from_env(&e, &MasterFlags::default()).unwrap().unwrap();
        assert_eq!(
            (l.launcher.as_str(), l.rank, l.world_size, l.local_rank),
            ("slurm", 5, 8, 1)
        );
        assert_eq!(l.node, Some(2));
        assert_eq!(l.job_id.as_deref(), Some("123456"));
        assert_eq!((l.master_addr.as_str(), l.master_port), ("node01", 23456));
        let flags = MasterFlags {
            addr: Some("head".into()),
            port: Some(4000),
        };
        let l = from_env(&e, &flags).unwrap().unwrap();
        assert_eq!((l.master_addr.as_str(), l.master_port), ("head", 4000));
    }

    #[test]
    fn no_launcher_means_one_process_and_bad_values_name_the_variable() {
        assert_eq!(from_env(&env(&[]), &MasterFlags::default()).unwrap(), None);
        let one = env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")]);
        assert_eq!(from_env(&one, &MasterFlags::default()).unwrap(), None);
        let off = env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("STALLSCOPE_RANKS", "off"),
        ]);
        assert_eq!(from_env(&off, &MasterFlags::default()).unwrap(), None);
        let e = from_env(
            &env(&[("RANK", "2"), ("WORLD_SIZE", "2")]),
            &MasterFlags::default(),
        );
        assert_eq!(e.unwrap_err().variable, "RANK");
        let e = from_env(
            &env(&[("RANK", "x"), ("WORLD_SIZE", "2")]),
            &MasterFlags::default(),
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "RANK=\"x\": expected a whole number"
        );
        let e = env(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "0")]);
        assert_eq!(
            from_env(&e, &MasterFlags::default()).unwrap_err().variable,
            "MASTER_PORT"
        );
        let e = env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_NODELIST", "n[1"),
        ]);
        let e = from_env(&e, &MasterFlags::default()).unwrap_err();
        assert_eq!(e.variable, "SLURM_JOB_NODELIST");
    }

    #[test]
    fn host_list_examples() {
        assert_eq!(first_host("node[01-04],gpu7").unwrap(), "node01");
        assert_eq!(first_host("gpu7,node[01-04]").unwrap(), "gpu7");
        assert_eq!(first_host("rack[2-3]-n[07,09]").unwrap(), "rack2-n07");
        assert_eq!(first_host("n[3,1-2]").unwrap(), "n3");
        assert!(first_host("n[]").is_err());
        assert!(first_host("n]").is_err());
        assert!(first_host("").is_err());
    }

    /// Property: for generated host lists (prefixes, zero-padded ranges,
    /// lists, plain hosts after the first), the first host is the prefix and
    /// the first group's first number as written.
    #[test]
    fn first_host_of_generated_lists() {
        let mut rng = stallscope_loader::Rng::new(11);
        for _ in 0..2000 {
            let pick = |rng: &mut stallscope_loader::Rng, n: u64| rng.next_u64() % n;
            let prefix: String = (0..1 + pick(&mut rng, 6))
                .map(|_| (b'a' + pick(&mut rng, 26) as u8) as char)
                .collect();
            let width = 1 + pick(&mut rng, 4) as usize;
            let start = pick(&mut rng, 10u64.pow(width as u32));
            let first = format!("{start:0width$}");
            let mut groups = vec![first.clone()];
            for _ in 0..pick(&mut rng, 3) {
                let a = pick(&mut rng, 1000);
                groups.push(format!("{a}-{}", a + pick(&mut rng, 9)));
            }
            let mut list = if pick(&mut rng, 4) == 0 {
                format!("{prefix}{first}")
            } else {
                format!("{prefix}[{}]", groups.join(","))
            };
            for _ in 0..pick(&mut rng, 3) {
                list.push_str(&format!(",other{}", pick(&mut rng, 100)));
            }
            assert_eq!(
                first_host(&list).unwrap(),
                format!("{prefix}{first}"),
                "{list}"
            );
        }
    }
}
