//! `cuparquet-s3-server ROOT HOST:PORT ACCESS_KEY SECRET_KEY`: serves the folders of ROOT as
//! S3 buckets (path-style URLs, SigV4 with the one key pair) until killed. Every accepted
//! connection has TCP_NODELAY set, and every file put there by hand gets its ETag recorded
//! first (s3s-fs otherwise hashes the whole file on every GET of an object it did not store:
//! ~0.2 GB/s served).

use std::path::Path;

use base64::Engine;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, addr, ak, sk] = &args[..] else {
        eprintln!("usage: cuparquet-s3-server ROOT HOST:PORT ACCESS_KEY SECRET_KEY");
        std::process::exit(2);
    };
    record_etags(Path::new(root));
    let fs = s3s_fs::FileSystem::new(root).expect("the root folder");
    let mut b = S3ServiceBuilder::new(fs);
    b.set_auth(SimpleAuth::from_single(ak.as_str(), sk.as_str()));
    let service = b.build();
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    eprintln!(
        "serving {root} at http://{}",
        listener.local_addr().unwrap()
    );
    let http = Builder::new(TokioExecutor::new());
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let _ = socket.set_nodelay(true);
        let conn = http.serve_connection(TokioIo::new(socket), service.clone());
        let conn = conn.into_owned();
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}

/// Writes s3s-fs's record of each object under `root`'s bucket folders that has none, with an
/// ETag of its length and modification time.
fn record_etags(root: &Path) {
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let Ok(buckets) = std::fs::read_dir(root) else {
        return;
    };
    for b in buckets.flatten() {
        let bucket = b.file_name().to_string_lossy().into_owned();
        if bucket.starts_with('.') || !b.path().is_dir() {
            continue;
        }
        let mut stack = vec![b.path()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let Ok(rel) = p.strip_prefix(b.path()) else {
                    continue;
                };
                let key = rel.to_string_lossy().replace('\\', "/");
                let info = root.join(format!(
                    ".bucket-{}.object-{}.internal.json",
                    b64(&bucket),
                    b64(&key)
                ));
                let meta = e.metadata().expect("metadata");
                let mtime = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                if !info.exists() {
                    let tag = format!("{:x}-{mtime:x}", meta.len());
                    std::fs::write(&info, format!("{{\"e_tag\":\"{tag}\"}}")).expect("write");
                }
            }
        }
    }
}
