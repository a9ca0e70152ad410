//! How the scan reads: the device, batch rows, the page index, the memory budget.

use cuparquet::Device;
use datafusion::error::{DataFusionError, Result};

/// The scan's settings. Settings not given here come from cuparquet's `CUPARQUET_*`
/// environment variables, then from its defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuScanOptions {
    /// Where batches are decoded: [`Device::Auto`] (default: the GPU when one can be used,
    /// else the host), [`Device::Host`] or [`Device::Cuda`].
    pub device: Device,
    /// Rows per batch; `None` (default): cuparquet's default (2^20) where the scan decodes on
    /// a GPU, which decodes batches of a million rows as fast as batches of eight thousand;
    /// [`HOST_BATCH_ROWS`] where it decodes on the host, whose batches arrow-rs decodes and
    /// DataFusion's operators read while they are still in the caches.
    pub batch_rows: Option<usize>,
    /// Read the page index to prune pages by the filters and to read only the pages of the
    /// rows kept (default true).
    pub page_index: bool,
    /// Prune row groups by their statistics (default true).
    pub pruning: bool,
    /// A device-memory budget for each file's load; `None`: cuparquet's default.
    pub memory_budget: Option<u64>,
    /// Apply the pushed filters cuparquet can evaluate to the rows (on the GPU for device
    /// scans), so that they are `Exact` and DataFusion drops its `FilterExec` for them
    /// (default true); false: every filter prunes only and stays `Inexact`.
    pub row_filter: bool,
    /// Several GPUs: the CUDA devices (ordinals, each once) the scan's partitions are spread
    /// over — partition `p` reads and decodes its files on `devices[p % devices.len()]`, so
    /// that `target_partitions` of at least the device count keeps every device busy. Empty
    /// (default): every partition on [`device`](Self::device).
    pub devices: Vec<usize>,
    /// Where the scan would decode on a GPU, decode on the host instead (DataFusion's own
    /// Parquet reader, the `Exact` filters applied as its row filters) where the GPU is not
    /// expected to win (default true): a scan that reads no column (`count(*)`), one under a
    /// `LIMIT`, one without a filter the GPU applies to the rows, or one whose filters keep
    /// most rows by the files' statistics ([`crate::placement`]). Measured on an H100
    /// (benches/RESULTS.md): those are the queries where the GPU scan moved every row it read
    /// back over PCIe and lost to DataFusion's own scan. False: always on the GPU.
    pub host_when_faster: bool,
    /// Compute the partial aggregation over a device scan on the GPU
    /// ([`DeviceAggregation`](crate::DeviceAggregation)), so that only each batch's groups
    /// cross PCIe (default true); false: DataFusion aggregates the scan's rows on the host.
    pub device_aggregation: bool,
}

impl Default for GpuScanOptions {
    fn default() -> Self {
        GpuScanOptions {
            device: Device::Auto,
            batch_rows: None,
            page_index: true,
            pruning: true,
            memory_budget: None,
            row_filter: true,
            devices: Vec::new(),
            host_when_faster: true,
            device_aggregation: true,
        }
    }
}

/// Rows per batch of a scan that decodes on the host, where
/// [`GpuScanOptions::batch_rows`] is not set: 65,536. Measured on a 2-core machine
/// (benches/history/2026-12-05.md, (IV); 4M lineitem rows, 2 partitions, the same run): Q1
/// 216.0 ms against 317.4 in batches of 2^20, Q3 120.7 against 157.5, Q6 75.6 against 112.2,
/// Q12 104.3 against 103.0 (batches of 8,192 rows measured no faster than 65,536).
pub const HOST_BATCH_ROWS: usize = 1 << 16;

/// The keys [`GpuScanOptions::set`] takes.
pub const OPTION_KEYS: [&str; 9] = [
    "device",
    "devices",
    "batch_rows",
    "page_index",
    "pruning",
    "memory_budget",
    "row_filter",
    "host_when_faster",
    "device_aggregation",
];

impl GpuScanOptions {
    /// The scan on `device`.
    pub fn with_device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// Several GPUs: the scan's partitions spread over the CUDA devices `ordinals` (see
    /// [`devices`](Self::devices); [`cuparquet::cuda_devices`] lists them all).
    pub fn with_devices(mut self, ordinals: impl IntoIterator<Item = usize>) -> Self {
        self.devices = ordinals.into_iter().collect();
        self
    }

    /// Where partition `partition` reads and decodes: its device of
    /// [`devices`](Self::devices), else [`device`](Self::device).
    pub fn device_of_partition(&self, partition: usize) -> Device {
        match self.devices.len() {
            0 => self.device,
            n => Device::Cuda(self.devices[partition % n]),
        }
    }

    /// Batches of about `rows` rows.
    pub fn with_batch_rows(mut self, rows: usize) -> Self {
        self.batch_rows = Some(rows);
        self
    }

    /// The options as `(key, value)` pairs that [`set`](Self::set) takes back to the same
    /// options: every key of [`OPTION_KEYS`] whose value is set (a plan shipped to another
    /// process carries them so).
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            ("device", self.device.to_string()),
            ("page_index", self.page_index.to_string()),
            ("pruning", self.pruning.to_string()),
            ("row_filter", self.row_filter.to_string()),
            ("host_when_faster", self.host_when_faster.to_string()),
            ("device_aggregation", self.device_aggregation.to_string()),
        ];
        if let Some(n) = self.batch_rows {
            v.push(("batch_rows", n.to_string()));
        }
        if let Some(n) = self.memory_budget {
            v.push(("memory_budget", n.to_string()));
        }
        if !self.devices.is_empty() {
            v.push(("devices", device_list(&self.devices)));
        }
        v
    }

    /// Sets one option by name, as `CREATE EXTERNAL TABLE … OPTIONS (…)` gives them (with or
    /// without a `format.` prefix): `device` (`auto`, `host`, `cuda:N`), `devices`
    /// (`cuda:0,cuda:1`, `all` for every CUDA device here, or empty for none), `batch_rows`,
    /// `page_index`, `pruning`, `row_filter`, `host_when_faster` and `device_aggregation`
    /// (`true`/`false`),
    /// `memory_budget` (bytes, or `512MiB`).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let key = key.strip_prefix("format.").unwrap_or(key);
        let bad = |why: String| {
            DataFusionError::Configuration(format!("cuparquet option {key} = {value:?}: {why}"))
        };
        match key {
            "device" => {
                self.device = value.parse().map_err(|e| bad(format!("{e}")))?;
            }
            "devices" => {
                self.devices = parse_devices(value).map_err(bad)?;
            }
            "batch_rows" => {
                let n: usize = value
                    .trim()
                    .parse()
                    .map_err(|_| bad("expected a number of rows".into()))?;
                if n == 0 {
                    return Err(bad("must be at least 1".into()));
                }
                self.batch_rows = Some(n);
            }
            "page_index" => self.page_index = parse_bool(value).ok_or_else(|| bad(bool_why()))?,
            "pruning" => self.pruning = parse_bool(value).ok_or_else(|| bad(bool_why()))?,
            "row_filter" => self.row_filter = parse_bool(value).ok_or_else(|| bad(bool_why()))?,
            "host_when_faster" => {
                self.host_when_faster = parse_bool(value).ok_or_else(|| bad(bool_why()))?
            }
            "device_aggregation" => {
                self.device_aggregation = parse_bool(value).ok_or_else(|| bad(bool_why()))?
            }
            "memory_budget" => {
                let n = cuparquet::config::parse_size("memory_budget", value)
                    .map_err(|e| bad(format!("{e}")))?;
                self.memory_budget = Some(n);
            }
            _ => {
                return Err(bad(format!(
                    "unknown option; the options are {}",
                    OPTION_KEYS.join(", ")
                )))
            }
        }
        Ok(())
    }
}

impl GpuScanOptions {
    /// The devices named ([`device`](Self::device) where it is `cuda:N`, and
    /// [`devices`](Self::devices)) exist on this machine: checked when a table is created, so
    /// that a device that is not there is an error then, not at its first scan.
    pub fn check_devices(&self) -> Result<()> {
        let mut named: Vec<Device> = self.devices.iter().map(|&n| Device::Cuda(n)).collect();
        if let Device::Cuda(_) = self.device {
            named.insert(0, self.device);
        }
        for d in named {
            let Device::Cuda(n) = d else { continue };
            let why = match cuparquet::cuda_devices() {
                Ok(here) if here.contains(&n) => continue,
                Ok(here) => format!(
                    "no such device here (valid: cuda:0 to cuda:{})",
                    here.len() - 1
                ),
                Err(e) => format!(
                    "{e}; read into host memory with the option device = host, or let device = auto choose"
                ),
            };
            return Err(DataFusionError::Configuration(format!(
                "cuparquet option device = {d}: {why}"
            )));
        }
        Ok(())
    }
}

/// `cuda:0,cuda:1`, `all` (every CUDA device here) or nothing: the ordinals, each once.
fn parse_devices(v: &str) -> std::result::Result<Vec<usize>, String> {
    if v.trim().is_empty() {
        return Ok(Vec::new());
    }
    cuparquet::scan::parse_device_list(v).map_err(|e| e.to_string())
}

/// The ordinals as `set` takes them back: `cuda:0,cuda:1`.
pub(crate) fn device_list(ordinals: &[usize]) -> String {
    let names: Vec<String> = ordinals.iter().map(|n| format!("cuda:{n}")).collect();
    names.join(",")
}

fn bool_why() -> String {
    "expected true or false".into()
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_refuse() {
        let mut o = GpuScanOptions::default();
        o.set("format.device", "host").unwrap();
        o.set("batch_rows", "65536").unwrap();
        o.set("page_index", "false").unwrap();
        o.set("memory_budget", "512MiB").unwrap();
        assert_eq!(o.device, Device::Host);
        assert_eq!(o.batch_rows, Some(65536));
        assert!(!o.page_index);
        assert_eq!(o.memory_budget, Some(512 << 20));
        let e = o.set("batch_rows", "0").unwrap_err().to_string();
        assert!(e.contains("batch_rows") && e.contains("at least 1"), "{e}");
        let e = o.set("colour", "red").unwrap_err().to_string();
        assert!(
            e.contains("unknown option") && e.contains("page_index"),
            "{e}"
        );
        let e = o.set("device", "tpu").unwrap_err().to_string();
        assert!(e.contains("device"), "{e}");
        // several GPUs: partitions dealt to the devices in turn
        o.set("devices", "cuda:1, gpu:0").unwrap();
        assert_eq!(o.devices, [1, 0]);
        let of: Vec<Device> = (0..5).map(|p| o.device_of_partition(p)).collect();
        assert_eq!(
            of,
            [1, 0, 1, 0, 1].map(Device::Cuda),
            "partition p on devices[p % 2]"
        );
        o.set("devices", "").unwrap();
        assert_eq!(o.device_of_partition(3), Device::Host);
        for (bad, why) in [
            ("cuda:0,cuda:0", "named twice"),
            ("cuda:0,host", "CUDA devices"),
        ] {
            let e = o.set("devices", bad).unwrap_err().to_string();
            assert!(e.contains("devices") && e.contains(why), "{bad}: {e}");
        }
        if cuparquet::cuda_devices().is_err() {
            let e = o.set("devices", "all").unwrap_err().to_string();
            assert!(e.contains("devices") && e.contains("cuda"), "{e}");
        }
    }

    #[test]
    fn options_round_trip_through_pairs() {
        let mut o = GpuScanOptions::default()
            .with_device(Device::Cuda(1))
            .with_batch_rows(4096);
        o.memory_budget = Some(3 << 30);
        o.row_filter = false;
        o.page_index = false;
        o.devices = vec![2, 0];
        o.host_when_faster = false;
        o.device_aggregation = false;
        for start in [GpuScanOptions::default(), o] {
            let mut back = GpuScanOptions {
                device: Device::Host,
                batch_rows: Some(7),
                page_index: !start.page_index,
                pruning: !start.pruning,
                memory_budget: Some(1),
                row_filter: !start.row_filter,
                devices: vec![5],
                host_when_faster: !start.host_when_faster,
                device_aggregation: !start.device_aggregation,
            };
            // the pairs name every option that differs from the default
            back.batch_rows = None;
            back.memory_budget = None;
            back.devices.clear();
            for (k, v) in start.to_pairs() {
                back.set(k, &v).unwrap();
            }
            assert_eq!(back, start);
        }
    }
}
