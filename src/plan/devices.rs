//! Several GPUs: which device reads and decodes each pass of a load (of one file or many), from
//! the footers alone — the planning half of spreading a load over the devices of a host.
//!
//! A load under a memory budget is cut into passes ([`super::passes`]); with several devices
//! each pass goes to one of them, which reads it, decodes it and holds its batches. The caller
//! takes batches in load order, so consecutive passes should run on different devices at once:
//! each pass goes, in load order, to the device with the least work so far (the bytes it reads
//! and its estimated device bytes; work within an eighth of the pass's own cost counts as
//! equal), on a tie the one that took a pass least recently. Passes of equal
//! cost therefore alternate between the devices, and a device that took a large pass sits out
//! the next ones until the others have caught up. A pass goes only to a device whose budget
//! holds its estimate; one that no device holds is an error naming its file, its first row
//! group and what it needs.
//!
//! [`spread_passes`] is pure: `cuparquet plan --devices cuda:0,cuda:1 --memory-budget 2GiB`
//! prints it.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{human_bytes, PassPlan};
use crate::error::{Error, Result};

/// A CUDA device a load may use, and the most device memory its share may reach at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DeviceBudget {
    /// The CUDA device ordinal (`cuda:N`).
    pub ordinal: usize,
    /// Its memory budget in bytes.
    pub budget: u64,
}

/// One pass of the load, in load order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SpreadPass {
    /// The file it reads (an index into the load's files).
    pub file: usize,
    /// The pass within that file's [`PassPlan`].
    pub pass: usize,
    /// Its row groups.
    pub row_groups: Vec<usize>,
    /// Rows it yields.
    pub rows: u64,
    /// Bytes it reads.
    pub read_bytes: u64,
    /// Its estimated device bytes while it decodes.
    pub device_bytes: u64,
    /// The device that takes it (an index into [`DeviceSpread::shares`]).
    pub device: usize,
}

/// What one device takes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceShare {
    /// The device and its budget.
    pub device: DeviceBudget,
    /// Its passes (indices into [`DeviceSpread::passes`]), in load order.
    pub passes: Vec<usize>,
    /// Rows of its passes.
    pub rows: u64,
    /// Bytes its passes read.
    pub read_bytes: u64,
    /// Their estimated device bytes, summed.
    pub device_bytes: u64,
}

/// A load's passes spread over devices.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceSpread {
    /// The files, in load order.
    pub files: Vec<PathBuf>,
    /// Every pass of every file, in load order, each with its device.
    pub passes: Vec<SpreadPass>,
    /// Per device, in the order given.
    pub shares: Vec<DeviceShare>,
}

/// The devices of `ordinals` ([`crate::config::check_devices`]), each with `budget`.
pub fn device_budgets(ordinals: &[usize], budget: u64) -> Result<Vec<DeviceBudget>> {
    crate::config::check_devices(ordinals)?;
    Ok(ordinals
        .iter()
        .map(|&ordinal| DeviceBudget { ordinal, budget })
        .collect())
}

/// Spreads the passes of `plans` (each file's path and passes, in load order) over `devices`
/// (see the [module docs](self)).
pub fn spread_passes(plans: &[(PathBuf, PassPlan)], devices: &[DeviceBudget]) -> Result<DeviceSpread> {
    let ordinals: Vec<usize> = devices.iter().map(|d| d.ordinal).collect();
    crate::config::check_devices(&ordinals)?;
    let mut shares: Vec<DeviceShare> = devices
        .iter()
        .map(|&device| DeviceShare {
            device,
            passes: Vec::new(),
            rows: 0,
            read_bytes: 0,
            device_bytes: 0,
        })
        .collect();
    // per device: (work so far, when it last took a pass)
    let mut work = vec![(0u128, 0usize); devices.len()];
    let mut passes = Vec::new();
    for (file, (path, plan)) in plans.iter().enumerate() {
        for (i, p) in plan.passes.iter().enumerate() {
            let fits = |d: &usize| p.device_bytes <= devices[*d].budget;
            let cost = u128::from(p.read_bytes) + u128::from(p.device_bytes);
            let Some(least) = (0..devices.len()).filter(fits).map(|d| work[d].0).min() else {
                return Err(too_large(path, p, devices));
            };
            // work within an eighth of this pass's cost counts as equal (passes of a file
            // differ by a few bytes): then the device that took a pass least recently
            let d = (0..devices.len())
                .filter(|d| fits(d) && work[*d].0 <= least + cost / 8)
                .min_by_key(|&d| (work[d].1, d))
                .unwrap_or(0);
            let at = passes.len();
            work[d].0 += cost;
            work[d].1 = at + 1;
            let rows: u64 = p.batches.iter().map(|b| b.num_rows()).sum();
            let s = &mut shares[d];
            s.passes.push(at);
            s.rows += rows;
            s.read_bytes += p.read_bytes;
            s.device_bytes += p.device_bytes;
            passes.push(SpreadPass {
                file,
                pass: i,
                row_groups: p.row_groups.clone(),
                rows,
                read_bytes: p.read_bytes,
                device_bytes: p.device_bytes,
                device: d,
            });
        }
    }
    Ok(DeviceSpread {
        files: plans.iter().map(|(p, _)| p.clone()).collect(),
        passes,
        shares,
    })
}

/// The error for a pass no device's budget holds: its file, first row group, what it needs,
/// and the largest budget there is.
fn too_large(path: &Path, p: &super::PlannedPass, devices: &[DeviceBudget]) -> Error {
    Error::MemoryBudget {
        path: path.to_path_buf(),
        row_group: p.row_groups.first().copied().unwrap_or(0),
        needed: p.device_bytes,
        budget: devices.iter().map(|d| d.budget).max().unwrap_or(0),
    }
}

impl fmt::Display for DeviceSpread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "spread over {} device{}: each pass read, decoded and held by one device, the \
             least loaded so far",
            self.shares.len(),
            if self.shares.len() == 1 { "" } else { "s" }
        )?;
        let many = self.files.len() > 1;
        for s in &self.shares {
            let list: Vec<String> = s
                .passes
                .iter()
                .map(|&k| {
                    let p = &self.passes[k];
                    if many {
                        format!("{}#{}", p.file, p.pass)
                    } else {
                        p.pass.to_string()
                    }
                })
                .collect();
            writeln!(
                f,
                "  cuda:{} (budget {}): {} pass{} ({}), {} rows, {} read, ~{} on the device in all",
                s.device.ordinal,
                human_bytes(s.device.budget),
                s.passes.len(),
                if s.passes.len() == 1 { "" } else { "es" },
                if list.is_empty() {
                    "none".to_string()
                } else if many {
                    format!("file#pass {}", list.join(", "))
                } else {
                    list.join(", ")
                },
                s.rows,
                human_bytes(s.read_bytes),
                human_bytes(s.device_bytes)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{BatchSpan, PlannedPass, RowRange};

    /// A plan of passes of (read, device) bytes, one row group and one 10-row batch each.
    fn plan(costs: &[(u64, u64)]) -> PassPlan {
        PassPlan {
            budget: 1 << 30,
            pass_budget: 1 << 29,
            batch_rows: 10,
            passes: costs
                .iter()
                .enumerate()
                .map(|(i, &(read, device))| PlannedPass {
                    row_groups: vec![i],
                    chunks: i..i + 1,
                    read_bytes: read,
                    device_bytes: device,
                    batches: vec![BatchSpan {
                        parts: vec![RowRange {
                            row_group: i,
                            rows: 0..10,
                        }],
                    }],
                    piece: None,
                })
                .collect(),
        }
    }

    fn devices(budgets: &[u64]) -> Vec<DeviceBudget> {
        budgets
            .iter()
            .enumerate()
            .map(|(ordinal, &budget)| DeviceBudget { ordinal, budget })
            .collect()
    }

    fn device_of(s: &DeviceSpread) -> Vec<usize> {
        s.passes.iter().map(|p| p.device).collect()
    }

    #[test]
    fn passes_of_equal_cost_alternate_between_devices() {
        let p = plan(&[(10, 30); 5]);
        let s = spread_passes(&[("a.parquet".into(), p)], &devices(&[100, 100])).unwrap();
        assert_eq!(device_of(&s), [0, 1, 0, 1, 0]);
        assert_eq!(s.shares[0].passes, [0, 2, 4]);
        assert_eq!(s.shares[1].passes, [1, 3]);
        assert_eq!((s.shares[0].rows, s.shares[1].rows), (30, 20));
        assert_eq!((s.shares[0].read_bytes, s.shares[1].read_bytes), (30, 20));
        assert_eq!(s.shares[0].device_bytes, 90);
        // passes a few bytes apart alternate too
        let p = plan(&[(93, 1300), (92, 1300), (92, 1301), (92, 1300)]);
        let s = spread_passes(&[("a.parquet".into(), p)], &devices(&[2000, 2000])).unwrap();
        assert_eq!(device_of(&s), [0, 1, 0, 1]);
        // one device takes everything
        let s = spread_passes(&[("a.parquet".into(), plan(&[(10, 30); 3]))], &devices(&[100]))
            .unwrap();
        assert_eq!(device_of(&s), [0, 0, 0]);
    }

    #[test]
    fn a_large_pass_keeps_its_device_out_of_the_next_ones() {
        // pass 0 costs as much as three others: device 1 takes the next three
        let p = plan(&[(30, 60), (10, 20), (10, 20), (10, 20), (10, 20)]);
        let s = spread_passes(&[("a.parquet".into(), p)], &devices(&[100, 100])).unwrap();
        assert_eq!(device_of(&s), [0, 1, 1, 1, 0]);
    }

    #[test]
    fn a_pass_goes_only_where_its_estimate_fits() {
        // device 1's budget holds only the small passes
        let p = plan(&[(10, 80), (10, 20), (10, 80), (10, 20)]);
        let s = spread_passes(&[("a.parquet".into(), p)], &devices(&[100, 50])).unwrap();
        assert_eq!(device_of(&s), [0, 1, 0, 1]);
        // a pass no device holds: an error naming its file and row group
        let p = plan(&[(10, 20), (10, 120)]);
        let e = spread_passes(&[("big.parquet".into(), p)], &devices(&[100, 50])).unwrap_err();
        match &e {
            Error::MemoryBudget {
                path,
                row_group,
                needed,
                budget,
            } => {
                assert_eq!(path, Path::new("big.parquet"));
                assert_eq!((*row_group, *needed, *budget), (1, 120, 100));
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn the_passes_of_many_files_are_spread_as_one_load() {
        let a = plan(&[(10, 30); 3]);
        let b = plan(&[(10, 30); 2]);
        let s = spread_passes(
            &[("a.parquet".into(), a), ("b.parquet".into(), b)],
            &devices(&[100, 100, 100]),
        )
        .unwrap();
        assert_eq!(device_of(&s), [0, 1, 2, 0, 1]);
        let files: Vec<(usize, usize)> = s.passes.iter().map(|p| (p.file, p.pass)).collect();
        assert_eq!(files, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]);
        let text = s.to_string();
        assert!(text.contains("spread over 3 devices"), "{text}");
        assert!(text.contains("cuda:0 (budget 100 B): 2 passes (file#pass 0#0, 1#0)"), "{text}");
        assert!(text.contains("cuda:2 (budget 100 B): 1 pass (file#pass 0#2)"), "{text}");
    }

    #[test]
    fn a_device_list_names_each_device_once() {
        assert!(device_budgets(&[], 1).is_err());
        let e = device_budgets(&[0, 1, 0], 1).unwrap_err().to_string();
        assert!(e.contains("cuda:0 is named twice"), "{e}");
        assert_eq!(
            device_budgets(&[1, 0], 7).unwrap(),
            [
                DeviceBudget {
                    ordinal: 1,
                    budget: 7
                },
                DeviceBudget {
                    ordinal: 0,
                    budget: 7
                }
            ]
        );
        let p = plan(&[(1, 1)]);
        assert!(spread_passes(&[("a".into(), p)], &devices(&[])).is_err());
    }
}
