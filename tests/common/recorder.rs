//! A tiny HTTP/1.1 server that records request heads, for tests of where requests (and their headers) go.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A tiny HTTP/1.1 server on `host`: each request's head is recorded, and `answer(path)` gives the raw
/// response. Runs until the test ends (the thread is detached; its listener dies with the process).
pub struct Recorder {
    pub port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    pub fn start(host: &str, answer: impl Fn(&str) -> String + Send + 'static) -> Recorder {
        let listener = TcpListener::bind((host, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = Vec::new();
                let mut byte = [0u8; 1];
                while !buf.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
                    buf.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let len = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                let mut body = vec![0u8; len];
                let _ = s.read_exact(&mut body);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                seen.lock().unwrap().push(head);
                let _ = s.write_all(answer(&path).as_bytes());
            }
        });
        Recorder { port, heads }
    }

    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// A redirect response with `status` to `location`.
pub fn redirect(status: u16, location: &str) -> String {
    format!("HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}
