//! Remote objects (feature `object-store`): Parquet files in S3, Google Cloud Storage, Azure
//! Blob Storage, on HTTP servers or behind `file://` URLs, opened through the `object_store`
//! crate (the version DataFusion uses); `io::remote` reads their column chunks.
//!
//! - A source given as a URL (`s3://bucket/key`, `gs://…`, `az://…`, `abfss://…`,
//!   `https://host/path`, `file:///path`) opens as a [`RemoteObject`] with **one** request: a
//!   suffix GET of the footer's speculative tail, whose answer also says how long the object is
//!   (no HEAD). The footer is parsed from that tail whenever it fits, as a local file's is.
//! - Column chunks are read by ranged GETs that we issue ourselves, many in flight at once
//!   ([`RemoteSettings::concurrency`]), each request cut into pieces of at most
//!   [`RemoteSettings::piece_size`] bytes. A piece lands where the read wants it as soon as its
//!   body is in: in host memory, or copied to the device while the other pieces are still
//!   downloading.
//! - Stores: the URL's scheme picks the builder, configured from the environment as
//!   `object_store`'s builders read it (`AWS_*`, `GOOGLE_*`, `AZURE_*`: `from_env`), then by the
//!   storage options the caller gives (`aws_endpoint`, `aws_allow_http`, `timeout`, …: the
//!   builders' configuration keys; an unknown key is an error naming it). A store the caller
//!   built itself is registered with [`register_store`] for a URL prefix and used for every URL
//!   under it. Stores are shared (one connection pool per bucket or host and options).
//! - Retries and timeouts are the store client's (`object_store`'s `RetryConfig` and
//!   `ClientOptions`: set them with the storage options, e.g. `timeout`, `connect_timeout`).
//!   Every error names the URL, the byte range and what the server said; a body shorter or
//!   longer than the range asked for is an error, never data.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use futures::stream::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreScheme};
use url::Url;

use crate::config::RemoteSettings;
use crate::error::{Error, Result};

fn url_error(url: &str, op: impl Into<String>, what: impl std::fmt::Display) -> Error {
    Error::Io {
        path: PathBuf::from(url),
        op: op.into(),
        source: std::io::Error::other(what.to_string()),
    }
}

/// An error of the store's client with its causes (`… body error: operation timed out`): what
/// the server or the connection said, which the client's own message leaves to its sources.
fn said(e: &object_store::Error) -> String {
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let s = c.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cause = c.source();
    }
    out
}

/// The stores made so far and those registered by callers, by URL prefix (`s3://bucket`,
/// `https://host:port`) and, for made ones, their options.
fn stores() -> &'static Mutex<HashMap<String, Arc<dyn ObjectStore>>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    STORES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// `scheme://authority` of `url`: the part a store serves.
fn prefix_of(url: &Url) -> String {
    match url.port() {
        Some(p) => format!("{}://{}:{p}", url.scheme(), url.host_str().unwrap_or("")),
        None => format!("{}://{}", url.scheme(), url.host_str().unwrap_or("")),
    }
}

/// Uses `store` for every URL under `prefix` (`s3://bucket`, `https://host:port`): a store
/// the caller built (its own credentials, client options or a wrapper), as DataFusion's
/// object-store registry does. Replaces a store registered before for the same prefix.
pub fn register_store(prefix: &str, store: Arc<dyn ObjectStore>) -> Result<()> {
    let url = Url::parse(prefix).map_err(|e| url_error(prefix, "register a store", e))?;
    let key = format!("registered {}", prefix_of(&url));
    stores()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, store);
    Ok(())
}

/// The store serving `url` and the object's path in it: the settings' own store (the object
/// at the URL's path), a registered one, or one made from the environment and the settings'
/// options (made once per prefix and options, then shared).
pub fn store_for(
    url: &str,
    settings: &RemoteSettings,
) -> Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    let parsed = Url::parse(url).map_err(|e| url_error(url, "parse the URL", e))?;
    if let Some(store) = &settings.store {
        let location = ObjectPath::from_url_path(parsed.path())
            .map_err(|e| url_error(url, "parse the URL", e))?;
        return Ok((Arc::clone(store), location));
    }
    let options = &settings.options;
    let (scheme, location) =
        ObjectStoreScheme::parse(&parsed).map_err(|e| url_error(url, "parse the URL", e))?;
    let prefix = prefix_of(&parsed);
    let mut map = stores().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = map.get(&format!("registered {prefix}")) {
        return Ok((Arc::clone(s), location));
    }
    let key = format!("{prefix} {options:?}");
    if let Some(s) = map.get(&key) {
        return Ok((Arc::clone(s), location));
    }
    let store = make_store(url, &parsed, &scheme, options)?;
    map.insert(key, Arc::clone(&store));
    Ok((store, location))
}

/// A builder of `object_store`, from the environment, then `options` (an unknown key is an
/// error naming it), for the store of `url`.
fn make_store(
    url: &str,
    parsed: &Url,
    scheme: &ObjectStoreScheme,
    options: &BTreeMap<String, String>,
) -> Result<Arc<dyn ObjectStore>> {
    let build = |e: object_store::Error| url_error(url, "configure its store", e);
    let key_error = |k: &str, e: object_store::Error| {
        url_error(url, "configure its store", format!("storage option '{k}': {e}"))
    };
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            let mut b = object_store::aws::AmazonS3Builder::from_env().with_url(url);
            for (k, v) in options {
                b = b.with_config(k.parse().map_err(|e| key_error(k, e))?, v);
            }
            Arc::new(b.build().map_err(build)?)
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            let mut b = object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(url);
            for (k, v) in options {
                b = b.with_config(k.parse().map_err(|e| key_error(k, e))?, v);
            }
            Arc::new(b.build().map_err(build)?)
        }
        ObjectStoreScheme::MicrosoftAzure => {
            let mut b = object_store::azure::MicrosoftAzureBuilder::from_env().with_url(url);
            for (k, v) in options {
                b = b.with_config(k.parse().map_err(|e| key_error(k, e))?, v);
            }
            Arc::new(b.build().map_err(build)?)
        }
        ObjectStoreScheme::Http => {
            let mut b = object_store::http::HttpBuilder::new().with_url(prefix_of(parsed));
            for (k, v) in options {
                b = b.with_config(k.parse().map_err(|e| key_error(k, e))?, v);
            }
            Arc::new(b.build().map_err(build)?)
        }
        ObjectStoreScheme::Local => Arc::new(object_store::local::LocalFileSystem::new()),
        other => {
            return Err(url_error(
                url,
                "open",
                format!(
                    "no store for {other:?} URLs (s3://, gs://, az://, abfss://, http(s)://, \
                     file://)"
                ),
            ))
        }
    };
    Ok(store)
}

/// The runtime remote reads run on: a few threads that drive the sockets; the GETs' bodies
/// are handed to the calling thread.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .thread_name("cuparquet-remote")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| Error::Device {
        device: "remote reads".into(),
        reason: format!("cannot start the I/O runtime: {e}"),
    })
}

/// Runs `f` to completion on the remote runtime, from any thread: inside another runtime (an
/// engine's) it waits on a thread of its own, as a runtime cannot be blocked on from within.
pub(crate) fn block_on<F>(f: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    if tokio::runtime::Handle::try_current().is_err() {
        return Ok(rt.block_on(f));
    }
    std::thread::scope(|s| {
        s.spawn(|| rt.block_on(f)).join().map_err(|_| Error::Device {
            device: "remote reads".into(),
            reason: "a remote read panicked".into(),
        })
    })
}

/// One object opened for reading: its store, its size, and the tail its opening read.
pub struct RemoteObject {
    url: String,
    store: Arc<dyn ObjectStore>,
    location: ObjectPath,
    size: u64,
    /// The object's last bytes (the suffix GET of opening) and where they start.
    tail: Bytes,
    tail_start: u64,
    settings: RemoteSettings,
    /// GETs issued for this object (the opening one included).
    gets: AtomicUsize,
}

impl std::fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteObject")
            .field("url", &self.url)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// What one ranged GET brought: the body, and when the answer's headers came.
pub(crate) struct Got {
    pub(crate) bytes: Bytes,
    pub(crate) headers: Instant,
}

impl RemoteObject {
    /// Opens `url` with one suffix GET of its last `tail` bytes (its length comes with the
    /// answer).
    pub fn open(url: &str, settings: &RemoteSettings, tail: u64) -> Result<Self> {
        let (store, location) = store_for(url, settings)?;
        let opts = GetOptions {
            range: Some(GetRange::Suffix(tail.max(1))),
            ..GetOptions::default()
        };
        let what = format!("GET its last {} bytes (the footer)", tail.max(1));
        let got = block_on(async {
            let r = store.get_opts(&location, opts).await?;
            let meta = r.meta.clone();
            let range = r.range.clone();
            Ok::<_, object_store::Error>((meta, range, r.bytes().await?))
        })?;
        let (meta, range, bytes) = got.map_err(|e| url_error(url, what.clone(), said(&e)))?;
        if bytes.len() as u64 != range.end.saturating_sub(range.start) || range.end != meta.size {
            return Err(url_error(
                url,
                what,
                format!(
                    "the server answered bytes {}..{} of {} with a body of {} bytes",
                    range.start,
                    range.end,
                    meta.size,
                    bytes.len()
                ),
            ));
        }
        Ok(RemoteObject {
            url: url.to_string(),
            store,
            location,
            size: meta.size,
            tail: bytes,
            tail_start: range.start,
            settings: settings.clone(),
            gets: AtomicUsize::new(1),
        })
    }

    /// `url` of `size` bytes as the caller knows it, opened without a request (no tail:
    /// footer reads GET their ranges).
    pub fn with_size(url: &str, settings: &RemoteSettings, size: u64) -> Result<Self> {
        let (store, location) = store_for(url, settings)?;
        Ok(RemoteObject {
            url: url.to_string(),
            store,
            location,
            size,
            tail: Bytes::new(),
            tail_start: size,
            settings: settings.clone(),
            gets: AtomicUsize::new(0),
        })
    }

    /// The URL it was opened by.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its length in bytes, as the store said when it was opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// GETs issued for it so far, the opening one included.
    pub fn gets(&self) -> usize {
        self.gets.load(Ordering::Relaxed)
    }

    /// How it is read (GETs in flight, piece size).
    pub fn settings(&self) -> &RemoteSettings {
        &self.settings
    }

    fn get_error(&self, range: &Range<u64>, e: impl std::fmt::Display) -> Error {
        url_error(
            &self.url,
            format!("GET bytes {}..{}", range.start, range.end),
            e,
        )
    }

    /// One ranged GET, its body checked to be exactly the range.
    pub(crate) async fn get(&self, range: Range<u64>) -> Result<Got> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..GetOptions::default()
        };
        let r = (self.store.get_opts(&self.location, opts).await)
            .map_err(|e| self.get_error(&range, said(&e)))?;
        let headers = Instant::now();
        let answered = r.range.clone();
        let bytes = r.bytes().await.map_err(|e| self.get_error(&range, said(&e)))?;
        if answered != range || bytes.len() as u64 != range.end - range.start {
            return Err(self.get_error(
                &range,
                format!(
                    "the server answered bytes {}..{} with a body of {} bytes",
                    answered.start,
                    answered.end,
                    bytes.len()
                ),
            ));
        }
        Ok(Got { bytes, headers })
    }

    /// Exactly the bytes `range` (from the tail read at opening where they lie in it).
    pub fn read_range(&self, range: Range<u64>, what: &str) -> Result<Vec<u8>> {
        if range.start >= self.tail_start && range.end <= self.size && range.start <= range.end {
            let a = (range.start - self.tail_start) as usize;
            let b = (range.end - self.tail_start) as usize;
            return Ok(self.tail[a..b].to_vec());
        }
        if range.start == range.end {
            return Ok(Vec::new());
        }
        let got = block_on(self.get(range.clone()))?.map_err(|e| match e {
            Error::Io { path, op, source } if !what.is_empty() => Error::Io {
                path,
                op: format!("{op} ({what})"),
                source,
            },
            e => e,
        })?;
        Ok(got.bytes.to_vec())
    }
}

/// The Parquet objects a URL names: the object itself; for a URL ending in `/`, the
/// `*.parquet` objects under that prefix (names starting with `_` or `.` skipped, sorted).
pub fn list(url: &str, settings: &RemoteSettings) -> Result<Vec<String>> {
    if !url.ends_with('/') {
        return Ok(vec![url.to_string()]);
    }
    let (store, prefix) = store_for(url, settings)?;
    let found = block_on(async {
        store
            .list(Some(&prefix))
            .try_collect::<Vec<object_store::ObjectMeta>>()
            .await
    })?
    .map_err(|e| url_error(url, "list", said(&e)))?;
    let base = url.trim_end_matches('/');
    let mut out: Vec<String> = found
        .into_iter()
        .filter_map(|m| {
            let name = m.location.filename()?.to_string();
            let rest = m.location.as_ref().strip_prefix(prefix.as_ref())?;
            let rest = rest.trim_start_matches('/');
            (!name.starts_with(['_', '.']) && name.to_ascii_lowercase().ends_with(".parquet"))
                .then(|| format!("{base}/{rest}"))
        })
        .collect();
    if out.is_empty() {
        return Err(url_error(url, "list", "no *.parquet object under this prefix"));
    }
    out.sort();
    Ok(out)
}
