//! The `web_fetch` tool: one http(s) page, fetched through the core's HTTP layer ([`HttpClient`]:
//! timeouts, cancellation) and turned into readable text (HTML rendered by `html2text`, whose output keeps
//! headings, lists and links in a Markdown-like form; scripts and styles are not rendered).
//!
//! Rules: refused when the built-in tools' network is off; only `http` and `https`; a URL carrying a user
//! name or password is refused (no credential is ever sent, on the first request or any redirect);
//! link-local and cloud metadata addresses (`169.254.0.0/16`, `fe80::/10`, `fd00:ec2::254`,
//! `100.100.100.200`) are refused for the URL and for every redirect target, before connecting (loopback
//! and private addresses are allowed: a local dev server is a legitimate target). Redirects are followed
//! by this module, at most [`MAX_REDIRECTS`] of them, each checked again; and the HTTP layer checks the
//! addresses each connection actually uses against the same rule ([`HttpClient::with_address_check`]), so
//! a name that resolves differently the second time (DNS rebinding) is refused too. The body is read up to
//! [`MAX_FETCH_BYTES`]; the text returned is capped at [`FETCH_OUTPUT_CAP_CHARS`] with a note.
//!
//! Must never: send a cookie, an authorization header or URL credentials; connect to a link-local
//! address it was told about; read an unbounded body.

use super::{Args, ToolReply};
use crate::cancel::CancelToken;
use crate::http::{BodyError, HttpClient, HttpConfig};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};
use std::time::Duration;
use url::Url;

/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 5;
/// Bytes of a response body read at most; the rest is not downloaded.
pub const MAX_FETCH_BYTES: usize = 5 * 1024 * 1024;
/// Characters of text returned at most.
pub const FETCH_OUTPUT_CAP_CHARS: usize = 40_000;

/// The HTTP settings of `web_fetch`: short timeouts, no retries (the model can call again), and the
/// metadata rule checked again on the addresses each connection uses (a name that resolved to a public
/// address when the URL was checked may resolve to a metadata one when it is connected to).
pub(crate) fn client() -> HttpClient {
    HttpClient::with_address_check(
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            total_timeout: Duration::from_secs(60),
            max_retries: 0,
            ..HttpConfig::default()
        },
        is_metadata_address,
    )
}

/// Whether `ip` is a link-local or cloud instance-metadata address, never fetched.
pub fn is_metadata_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local() || v4 == Ipv4Addr::new(100, 100, 100, 200),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_metadata_address(IpAddr::V4(v4));
            }
            (v6.segments()[0] & 0xffc0) == 0xfe80 || v6 == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254)
        }
    }
}

/// Check one URL (the first or a redirect target) against the rules; `Ok` with it parsed.
fn check_url(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("web_fetch: {raw:?} is not a valid URL: {e}"))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!("web_fetch only fetches http and https URLs, not {}:", url.scheme()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("web_fetch refuses URLs with a user name or password in them: credentials are never sent".into());
    }
    let Some(host) = url.host_str() else {
        return Err(format!("web_fetch: {raw:?} has no host"));
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let host_plain = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<IpAddr> = match host_plain.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => {
            if host_plain.eq_ignore_ascii_case("metadata.google.internal") {
                return Err(format!("web_fetch refuses {host}: cloud instance metadata is never fetched"));
            }
            (host_plain, port)
                .to_socket_addrs()
                .map_err(|e| format!("web_fetch: cannot resolve {host}: {e}"))?
                .map(|a| a.ip())
                .collect()
        }
    };
    if let Some(ip) = addrs.iter().find(|ip| is_metadata_address(**ip)) {
        return Err(format!(
            "web_fetch refuses {host} ({ip}): link-local and cloud metadata addresses are never fetched"
        ));
    }
    Ok(url)
}

/// `web_fetch(url)`. `network` is the built-in tools' network switch.
pub(crate) fn web_fetch(client: &HttpClient, network: bool, input: &Value, cancel: &CancelToken) -> ToolReply {
    let args = Args::new("web_fetch", input, &["url"])?;
    let raw = args.string("url")?;
    if !network {
        return Err("web_fetch is refused: network access is off for this agent (network=false). Work with the files \
             in the workspace, or ask the user for the page's content."
            .to_string());
    }
    let mut url = check_url(raw.trim())?;
    let mut notes: Vec<String> = Vec::new();
    let headers = vec![(
        "accept".to_string(),
        "text/html,application/xhtml+xml,text/plain,application/json;q=0.9,*/*;q=0.5".to_string(),
    )];
    let mut hops = 0usize;
    let mut response = loop {
        if cancel.is_cancelled() {
            return Err("cancelled: web_fetch was stopped".to_string());
        }
        let response = client.get_once(url.as_str(), &headers, cancel).map_err(|e| match e {
            crate::error::Error::Cancelled { .. } => "cancelled: web_fetch was stopped".to_string(),
            other => format!("web_fetch could not fetch {url}: {other}"),
        })?;
        if !(300..400).contains(&response.status) || response.status == 304 {
            break response;
        }
        let Some(location) = response.header("location") else { break response };
        if hops >= MAX_REDIRECTS {
            return Err(format!("web_fetch stopped after {MAX_REDIRECTS} redirects (last: {url} → {location})"));
        }
        hops += 1;
        let next = url.join(location).map_err(|e| format!("web_fetch: bad redirect target {location:?}: {e}"))?;
        let next = check_url(next.as_str())?;
        let cross = next.origin() != url.origin();
        notes.push(format!(
            "[redirected ({}) to {next}{}]",
            response.status,
            if cross { ", another origin" } else { "" }
        ));
        url = next;
    };
    let status = response.status;
    let content_type = response.header("content-type").unwrap_or("").to_ascii_lowercase();
    let mut body = Vec::new();
    let mut cut = false;
    loop {
        match response.next_chunk() {
            Ok(Some(chunk)) => {
                let room = MAX_FETCH_BYTES - body.len();
                if chunk.len() >= room {
                    body.extend_from_slice(&chunk[..room]);
                    cut = true;
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(BodyError::Cancelled) => return Err("cancelled: web_fetch was stopped".to_string()),
            Err(BodyError::Timeout(phase, after)) => {
                return Err(format!("web_fetch: {url} timed out ({phase}, after {} s)", after.as_secs()));
            }
            Err(BodyError::Broken(why)) => return Err(format!("web_fetch: {url}: {why}")),
        }
    }
    drop(response);
    let is_html = content_type.contains("html") || (content_type.is_empty() && looks_like_html(&body));
    let textual = is_html
        || content_type.starts_with("text/")
        || content_type.contains("json")
        || content_type.contains("xml")
        || content_type.contains("javascript")
        || (content_type.is_empty() && std::str::from_utf8(&body).is_ok());
    if !textual {
        return Err(format!(
            "web_fetch: {url} is {content_type} ({} bytes), not a page of text; it is not shown",
            body.len()
        ));
    }
    let text = if is_html {
        html2text::from_read(&body[..], 120).unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned())
    } else {
        String::from_utf8_lossy(&body).into_owned()
    };
    let text = text.trim();
    let mut out = String::new();
    for n in &notes {
        out.push_str(n);
        out.push('\n');
    }
    if !(200..300).contains(&status) {
        out.push_str(&format!("[HTTP status {status}]\n"));
    }
    let chars = text.chars().count();
    if chars > FETCH_OUTPUT_CAP_CHARS {
        out.extend(text.chars().take(FETCH_OUTPUT_CAP_CHARS));
        out.push_str(&format!(
            "\n[page cut: {} more characters not shown (the text is capped at {FETCH_OUTPUT_CAP_CHARS})]",
            chars - FETCH_OUTPUT_CAP_CHARS
        ));
    } else if text.is_empty() {
        out.push_str("(the page has no text)");
    } else {
        out.push_str(text);
    }
    if cut {
        out.push_str(&format!(
            "\n[download stopped at {} MB: the rest of the page was not read]",
            MAX_FETCH_BYTES >> 20
        ));
    }
    if !(200..300).contains(&status) {
        return Err(out);
    }
    Ok(out)
}

fn looks_like_html(body: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&body[..body.len().min(512)]).to_ascii_lowercase();
    head.contains("<html") || head.contains("<!doctype html")
}
