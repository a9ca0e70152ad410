//! Moto's S3 server on 127.0.0.1 for the SQL and distributed remote tests
//! (scripts/py/remote_fixture.py, bucket `data`), and a store of it. Included by
//! cuparquet-distributed's tests too (`#[path]`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::ObjectStore;

/// The server; stopped when dropped.
pub struct Moto {
    child: Child,
    /// Its endpoint, `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Moto's S3 server holding `items` (`KEY=PATH` or `PREFIX/=DIR`) in bucket `data`; `None`,
/// saying that `what` is skipped, where it cannot start (moto not installed), unless
/// `CUPARQUET_REQUIRE_REMOTE=1` (CI sets it), which makes that a failure.
pub fn start(items: &[String], what: &str) -> Option<Moto> {
    let python = std::env::var("CUPARQUET_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut child = Command::new(&python)
        .arg("../scripts/py/remote_fixture.py")
        .args(items)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
    let endpoint = serde_json::from_str::<serde_json::Value>(&line)
        .ok()
        .and_then(|v| v["s3"].as_str().map(str::to_string));
    let Some(endpoint) = endpoint else {
        let _ = child.kill();
        let _ = child.wait();
        if std::env::var("CUPARQUET_REQUIRE_REMOTE").as_deref() == Ok("1") {
            panic!("CUPARQUET_REQUIRE_REMOTE=1 but moto's S3 server did not start ({python})");
        }
        eprintln!("{what} skipped: no S3 server ({python}; pip install \"moto[server]\")");
        return None;
    };
    Some(Moto { child, endpoint })
}

/// A store of bucket `data` on `endpoint`.
pub fn store(endpoint: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_bucket_name("data")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .unwrap(),
    )
}
