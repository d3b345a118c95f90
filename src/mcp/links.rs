//! Which addresses a server may have kin show the user as a link to follow, or open with
//! `$BROWSER`: `https:`, and `http:` to this machine (a loopback redirect). Anything else
//! (`file:`, `javascript:`, `data:`, a custom scheme, plain `http:` elsewhere) is refused,
//! naming the scheme.

/// `Ok` when `url` may be shown or opened; else why not.
pub(crate) fn openable(url: &str) -> Result<(), String> {
    let parsed =
        reqwest::Url::parse(url).map_err(|error| format!("its address is not a URL ({error})"))?;
    let host = parsed.host_str().unwrap_or_default();
    let ip = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || ip
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        "http" => Err(
            "its address is plain `http:` to another machine; kin opens only `https:` \
             addresses (and `http:` to this machine)"
                .to_owned(),
        ),
        scheme => Err(format!(
            "its address has the scheme `{scheme}:`; kin opens only `https:` addresses (and \
             `http:` to this machine)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_and_loopback_http_are_opened() {
        for fine in [
            "https://example.com/consent",
            "http://127.0.0.1:8080/callback",
            "http://localhost/x",
            "http://[::1]:9/",
        ] {
            assert!(openable(fine).is_ok(), "{fine}");
        }
        for (refused, named) in [
            ("file:///etc/passwd", "`file:`"),
            ("javascript:alert(1)", "`javascript:`"),
            ("vscode://x/y", "`vscode:`"),
            ("http://example.com/", "plain `http:`"),
            ("not a url", "not a URL"),
        ] {
            let error = openable(refused).unwrap_err();
            assert!(error.contains(named), "{refused}: {error}");
        }
    }
}
