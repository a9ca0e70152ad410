//! `cuparquet-s3-server ROOT HOST:PORT ACCESS_KEY SECRET_KEY`: serves the folders of ROOT as
//! S3 buckets (path-style URLs, SigV4 with the one key pair) until killed. Every accepted
//! connection has TCP_NODELAY set.

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
