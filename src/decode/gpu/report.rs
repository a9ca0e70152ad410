//! What a device load reports of its decoding: where each field was decoded and why, pages
//! decompressed on the host, and (with `CUPARQUET_PROFILE`) the time of each stage.

/// Where each field of a device load was decoded.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GpuDecodeReport {
    /// One entry per projected field, in schema order.
    pub fields: Vec<FieldDecode>,
    /// Pages decompressed on the host (codecs other than SNAPPY) and uploaded for the GPU
    /// decoder.
    pub host_decompressed_pages: usize,
    /// Which: per field and codec, the pages decompressed on the host.
    pub host_decompressed: Vec<HostDecompressed>,
    /// With `CUPARQUET_PROFILE` set: wall seconds per stage of the GPU decoder (each kernel
    /// waited for), in first-run order; empty otherwise.
    pub stages: Vec<(String, f64)>,
}

impl GpuDecodeReport {
    /// Counts `h`'s pages under its (field, codec) entry, added when new.
    pub(crate) fn add_host_decompressed(&mut self, h: HostDecompressed) {
        match self
            .host_decompressed
            .iter_mut()
            .find(|x| x.field == h.field && x.codec == h.codec)
        {
            Some(x) => x.pages += h.pages,
            None => self.host_decompressed.push(h),
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
        self.host_decompressed_pages += other.host_decompressed_pages;
        for h in other.host_decompressed {
            self.add_host_decompressed(h);
        }
        for (name, t) in other.stages {
            match self.stages.iter_mut().find(|(n, _)| *n == name) {
                Some((_, x)) => *x += t,
                None => self.stages.push((name, t)),
            }
        }
    }
}

/// Pages of one field decompressed on the host before the GPU decoded them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostDecompressed {
    /// The field.
    pub field: String,
    /// The codec (e.g. `ZSTD(ZstdLevel(1))`).
    pub codec: String,
    /// Pages, over all row groups loaded.
    pub pages: usize,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_reports_of_waves_add_up() {
        let field = |name: &str, on_gpu: bool, reason: &str| FieldDecode {
            name: name.into(),
            on_gpu,
            reason: reason.into(),
        };
        let hd = |field: &str, codec: &str, pages: usize| HostDecompressed {
            field: field.into(),
            codec: codec.into(),
            pages,
        };
        let mut a = GpuDecodeReport::default();
        a.absorb(GpuDecodeReport {
            fields: vec![field("a", true, "INT64"), field("b", true, "BYTE_ARRAY")],
            host_decompressed_pages: 3,
            host_decompressed: vec![hd("a", "ZSTD", 3)],
            stages: vec![("page tables".into(), 0.5)],
        });
        a.absorb(GpuDecodeReport {
            fields: vec![
                field("a", true, "INT64"),
                field("b", false, "DELTA in this part"),
            ],
            host_decompressed_pages: 4,
            host_decompressed: vec![hd("a", "ZSTD", 1), hd("b", "SNAPPY", 3)],
            stages: vec![("page tables".into(), 0.25), ("kernel x".into(), 1.0)],
        });
        assert_eq!(a.fields[0], field("a", true, "INT64"));
        // a field decoded on the host in any wave is reported so
        assert_eq!(a.fields[1], field("b", false, "DELTA in this part"));
        assert_eq!(a.host_decompressed_pages, 7);
        assert_eq!(
            a.host_decompressed,
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
