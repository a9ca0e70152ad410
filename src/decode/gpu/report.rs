//! What a device load reports of its decoding: where each field was decoded and why, where
//! each field's compressed pages were decompressed, and (with `CUPARQUET_PROFILE`) the time of
//! each stage.

/// Where each field of a device load was decoded.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GpuDecodeReport {
    /// One entry per projected field, in schema order.
    pub fields: Vec<FieldDecode>,
    /// Pages decompressed on the host (codecs nvCOMP does not take, or nvCOMP absent) and
    /// uploaded for the GPU decoder.
    pub host_decompressed_pages: usize,
    /// Pages nvCOMP decompressed on the device.
    pub nvcomp_pages: usize,
    /// Per field and codec, where its compressed pages were decompressed.
    pub decompressed: Vec<Decompressed>,
    /// With `CUPARQUET_PROFILE` set: wall seconds per stage of the GPU decoder (each kernel
    /// waited for), in first-run order; empty otherwise.
    pub stages: Vec<(String, f64)>,
}

impl GpuDecodeReport {
    /// Counts `d`'s pages under its (field, codec) entry, added when new.
    pub(crate) fn add_decompressed(&mut self, d: Decompressed) {
        self.host_decompressed_pages += d.pages.host;
        self.nvcomp_pages += d.pages.nvcomp;
        match self
            .decompressed
            .iter_mut()
            .find(|x| x.field == d.field && x.codec == d.codec)
        {
            Some(x) => x.pages += d.pages,
            None => self.decompressed.push(d),
        }
    }

    /// Adds the report of another part of the same load (a wave of a pipelined load): a field
    /// decoded on the host in any part is reported so, with that part's reason; pages and stage
    /// times are summed.
    pub fn absorb(&mut self, other: GpuDecodeReport) {
        if self.fields.is_empty() {
            self.fields = other.fields;
        } else {
            for (mine, theirs) in self.fields.iter_mut().zip(other.fields) {
                if mine.on_gpu && !theirs.on_gpu {
                    *mine = theirs;
                }
            }
        }
        for d in other.decompressed {
            self.add_decompressed(d);
        }
        for (name, t) in other.stages {
            match self.stages.iter_mut().find(|(n, _)| *n == name) {
                Some((_, x)) => *x += t,
                None => self.stages.push((name, t)),
            }
        }
    }
}

/// Where the compressed pages of one field (of one codec) were decompressed before the GPU
/// decoded them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decompressed {
    /// The field.
    pub field: String,
    /// The codec (e.g. `ZSTD(ZstdLevel(1))`).
    pub codec: String,
    /// Pages, over all row groups loaded, by place.
    pub pages: PageCounts,
}

/// Compressed pages counted by where they were decompressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PageCounts {
    /// On the host (then uploaded).
    pub host: usize,
    /// By nvCOMP on the device.
    pub nvcomp: usize,
    /// By cuparquet's own kernels on the device (SNAPPY, GZIP).
    pub kernel: usize,
}

impl PageCounts {
    /// All pages counted.
    pub fn total(&self) -> usize {
        self.host + self.nvcomp + self.kernel
    }

    /// The places that decompressed pages, with their counts: `"nvCOMP"`, `"kernel"`, `"host"`,
    /// in that order.
    pub fn by_place(&self) -> impl Iterator<Item = (&'static str, usize)> {
        [
            ("nvCOMP", self.nvcomp),
            ("kernel", self.kernel),
            ("host", self.host),
        ]
        .into_iter()
        .filter(|&(_, n)| n > 0)
    }

    /// Where, in words: `"host"`, `"nvCOMP"`, `"kernel"`, or several joined by `+`.
    pub fn places(&self) -> String {
        self.by_place().map(|(p, _)| p).collect::<Vec<_>>().join("+")
    }
}

impl std::ops::AddAssign for PageCounts {
    fn add_assign(&mut self, o: Self) {
        self.host += o.host;
        self.nvcomp += o.nvcomp;
        self.kernel += o.kernel;
    }
}

/// Where one field was decoded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldDecode {
    /// The field.
    pub name: String,
    /// Decoded by the GPU kernels (else on the host by arrow-rs, then uploaded).
    pub on_gpu: bool,
    /// For the GPU: the conversion; for the host: why.
    pub reason: String,
}

/// Per chunk: each page's (device address, length) of decompressed data, and where its pages
/// were decompressed (what the decompressors hand the locating stage, `locate.rs`).
pub(super) type PageLocations = (Vec<(u64, u64)>, PageCounts);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_counts_name_their_places() {
        let mut p = PageCounts::default();
        assert_eq!(p.places(), "");
        p += PageCounts {
            host: 2,
            ..PageCounts::default()
        };
        assert_eq!(p.places(), "host");
        p += PageCounts {
            nvcomp: 5,
            kernel: 1,
            host: 0,
        };
        assert_eq!((p.total(), p.places().as_str()), (8, "nvCOMP+kernel+host"));
    }

    #[test]
    fn decode_reports_of_waves_add_up() {
        let field = |name: &str, on_gpu: bool, reason: &str| FieldDecode {
            name: name.into(),
            on_gpu,
            reason: reason.into(),
        };
        let hd = |field: &str, codec: &str, host: usize| Decompressed {
            field: field.into(),
            codec: codec.into(),
            pages: PageCounts {
                host,
                ..PageCounts::default()
            },
        };
        let mut a = GpuDecodeReport::default();
        a.absorb(GpuDecodeReport {
            fields: vec![field("a", true, "INT64"), field("b", true, "BYTE_ARRAY")],
            host_decompressed_pages: 3,
            nvcomp_pages: 0,
            decompressed: vec![hd("a", "ZSTD", 3)],
            stages: vec![("page tables".into(), 0.5)],
        });
        a.absorb(GpuDecodeReport {
            fields: vec![
                field("a", true, "INT64"),
                field("b", false, "DELTA in this part"),
            ],
            host_decompressed_pages: 4,
            nvcomp_pages: 0,
            decompressed: vec![hd("a", "ZSTD", 1), hd("b", "SNAPPY", 3)],
            stages: vec![("page tables".into(), 0.25), ("kernel x".into(), 1.0)],
        });
        assert_eq!(a.fields[0], field("a", true, "INT64"));
        // a field decoded on the host in any wave is reported so
        assert_eq!(a.fields[1], field("b", false, "DELTA in this part"));
        assert_eq!(a.host_decompressed_pages, 7);
        assert_eq!(
            a.decompressed,
            vec![hd("a", "ZSTD", 4), hd("b", "SNAPPY", 3)]
        );
        assert_eq!(
            a.stages,
            vec![
                ("page tables".to_string(), 0.75),
                ("kernel x".to_string(), 1.0)
            ]
        );
    }
}
