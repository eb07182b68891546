//! AWS Signature Version 4 for one POST request (what Bedrock Runtime needs), on ring's HMAC-SHA256.
//!
//! Written here rather than taken from the official `aws-sigv4` crate, which pulls tokio and about sixty
//! crates into a core that must stay runtime-free; the algorithm is short and pinned by AWS's published
//! test vectors and by a signature computed with the official crate (see the tests).
//!
//! Must never: log, print or return the secret key or the session token (only the signature leaves).

use std::time::{SystemTime, UNIX_EPOCH};

use ring::{digest, hmac};

/// What signs a request: key id, secret key, and the session token of temporary credentials.
pub(crate) struct SigningKey<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
    pub session_token: Option<&'a str>,
}

/// `YYYYMMDD'T'HHMMSS'Z'` (x-amz-date) of `t`, in UTC.
pub(crate) fn amz_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Percent-encode everything but the unreserved characters `A-Za-z0-9-._~` (RFC 3986, as SigV4 wants).
pub(crate) fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> hmac::Tag {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
}

/// The signing key for one day, region and service.
fn derive_key(secret: &str, date: &str, region: &str, service: &str) -> hmac::Tag {
    let k_date = hmac_sha256(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac_sha256(k_date.as_ref(), region.as_bytes());
    let k_service = hmac_sha256(k_region.as_ref(), service.as_bytes());
    hmac_sha256(k_service.as_ref(), b"aws4_request")
}

/// Sign a request. `path` is the request path as sent (already percent-encoded once; SigV4 for services
/// other than S3 encodes each segment once more), `query` the raw query string, `headers` the headers to
/// sign (they must include `host`). Returns the headers to add: `x-amz-date`, `x-amz-security-token`
/// (with temporary credentials) and `authorization`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sign(
    method: &str,
    path: &str,
    query: &str,
    headers: &[(String, String)],
    body: &[u8],
    key: &SigningKey<'_>,
    region: &str,
    service: &str,
    now: SystemTime,
) -> Vec<(String, String)> {
    let amz_date = amz_date(now);
    let date = &amz_date[..8];
    let mut added = vec![("x-amz-date".to_string(), amz_date.clone())];
    if let Some(token) = key.session_token {
        added.push(("x-amz-security-token".to_string(), token.to_string()));
    }
    let mut signed: Vec<(String, String)> = headers
        .iter()
        .chain(added.iter())
        .map(|(k, v)| (k.to_ascii_lowercase(), v.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect();
    signed.sort();
    let canonical_headers: String = signed.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed_names = signed.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(";");
    let canonical_uri =
        if path.is_empty() { "/".to_string() } else { path.split('/').map(uri_encode).collect::<Vec<_>>().join("/") };
    let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    params.sort_unstable();
    let canonical_query = params
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join("&");
    let canonical_request = format!(
        "{method}\n{canonical_uri}\n{canonical_query}\n{canonical_headers}\n{signed_names}\n{}",
        sha256_hex(body)
    );
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let string_to_sign = format!("AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}", sha256_hex(canonical_request.as_bytes()));
    let signing_key = derive_key(key.secret_access_key, date, region, service);
    let signature = hex(hmac_sha256(signing_key.as_ref(), string_to_sign.as_bytes()).as_ref());
    added.push((
        "authorization".to_string(),
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_names}, Signature={signature}",
            key.access_key_id
        ),
    ));
    added
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn amz_date_formats_utc() {
        assert_eq!(amz_date(at(0)), "19700101T000000Z");
        // 2015-08-30T12:36:00Z, the date of AWS's SigV4 test suite.
        assert_eq!(amz_date(at(1_440_938_160)), "20150830T123600Z");
        assert_eq!(amz_date(at(951_782_400)), "20000229T000000Z");
    }

    #[test]
    fn signing_key_matches_the_aws_documentation_example() {
        // "Examples of how to derive a signing key for Signature Version 4" (AWS General Reference).
        let k = derive_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam");
        assert_eq!(hex(k.as_ref()), "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
    }

    #[test]
    fn post_vanilla_matches_the_aws_sigv4_test_suite() {
        // aws-sig-v4-test-suite "post-vanilla": POST / with host and x-amz-date, empty body.
        let key = SigningKey {
            access_key_id: "AKIDEXAMPLE",
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            session_token: None,
        };
        let headers = vec![("host".to_string(), "example.amazonaws.com".to_string())];
        let out = sign("POST", "/", "", &headers, b"", &key, "us-east-1", "service", at(1_440_938_160));
        assert_eq!(out[0], ("x-amz-date".to_string(), "20150830T123600Z".to_string()));
        assert_eq!(
            out[1].1,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, \
             Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
        );
    }

    #[test]
    fn bedrock_path_with_a_colon_is_encoded_twice_like_the_official_signer() {
        // Computed with the official aws-sigv4 crate (1.6, default settings: double URI encoding) for the
        // same request, key and time.
        let key = SigningKey {
            access_key_id: "AKIDEXAMPLE",
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            session_token: Some("SESSIONTOKEN"),
        };
        let headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("host".to_string(), "bedrock-runtime.us-west-2.amazonaws.com".to_string()),
        ];
        let path = format!("/model/{}/invoke", uri_encode("us.anthropic.claude-sonnet-4-6-v1:0"));
        assert_eq!(path, "/model/us.anthropic.claude-sonnet-4-6-v1%3A0/invoke");
        let out = sign("POST", &path, "", &headers, b"{\"a\":1}", &key, "us-west-2", "bedrock", at(1_764_505_800));
        assert_eq!(out[1], ("x-amz-security-token".to_string(), "SESSIONTOKEN".to_string()));
        assert_eq!(out[2].1, OFFICIAL_BEDROCK_AUTH);
    }

    const OFFICIAL_BEDROCK_AUTH: &str = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20251130/us-west-2/bedrock/aws4_request, \
         SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, \
         Signature=d43bc84bdcd86968288d1d163df8b9a8f11f8c2ff9d7f01340137d797267fb4b";
}
