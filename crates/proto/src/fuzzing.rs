//! The property every fuzz input must satisfy, shared by the `cargo fuzz`
//! target (`fuzz/fuzz_targets/decode.rs`) and the seeded random-input loop
//! that runs under `cargo test` (`tests/fuzz_smoke.rs`).

use crate::{DecodeLimits, Depth, Filter, LdapMessage, ProtocolOp, SearchRequest};

impl<'a> ProtocolOp<'a> {
    /// The search request, if this is one whose filter the RFC 4515 string
    /// form can represent: attribute descriptions and rule names made of
    /// the characters that form allows (arbitrary bytes there have no
    /// escape), and no matching rule literally named `dn` (ambiguous with
    /// the `:dn` flag in the RFC 4515 grammar).
    fn clone_if_printable(&self) -> Option<SearchRequest<'a>> {
        match self {
            ProtocolOp::SearchRequest(search) if printable(&search.filter) => Some(*search),
            _ => None,
        }
    }
}

fn printable_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b';' | b'_'))
}

fn printable(filter: &Filter<'_>) -> bool {
    match filter {
        Filter::And(children) | Filter::Or(children) | Filter::Not(children) => {
            children.iter().all(|f| printable(&f))
        }
        Filter::Equality(a)
        | Filter::GreaterOrEqual(a)
        | Filter::LessOrEqual(a)
        | Filter::Approx(a) => printable_name(a.attr),
        Filter::Substrings(s) => printable_name(s.attr),
        Filter::Present(attr) => printable_name(attr),
        Filter::Extensible(m) => {
            m.attr.is_none_or(printable_name)
                && m.rule
                    .is_none_or(|r| printable_name(r) && !r.eq_ignore_ascii_case(b"dn"))
        }
    }
}

/// Decodes `data` as pipelined PDUs. For each message that decodes:
/// walking every lazy list must work, re-encoding must decode to the same
/// message, and encoding that again must give the same bytes (the encoder
/// is canonical). Returns a description of the first violation.
pub fn check_decode_round_trip(data: &[u8]) -> Result<(), String> {
    let limits = DecodeLimits {
        max_pdu_bytes: 1 << 20,
        max_depth: 32,
    };
    let mut rest = data;
    while !rest.is_empty() {
        let Ok((msg, used)) = LdapMessage::decode_prefix(rest, &limits) else {
            return Ok(());
        };
        rest = rest.get(used..).unwrap_or_default();
        // Debug walks every Seq; Display walks every filter.
        let shown = format!("{msg:?}");
        if let Some(search) = msg.op.clone_if_printable() {
            let text = search.filter.to_string();
            let parsed = crate::filter_str::parse(&text, 64)
                .map_err(|e| format!("printed filter {text:?} does not parse: {e}"))?;
            let reparsed = Filter::from_ber(&parsed, Depth::new(64))
                .map_err(|e| format!("parsed filter {text:?} does not decode: {e}"))?;
            if reparsed != search.filter {
                return Err(format!("filter {text:?} changed through its string form"));
            }
        }
        let mut first = Vec::new();
        msg.encode(&mut first);
        let again = LdapMessage::decode(&first, &limits)
            .map_err(|e| format!("re-encoding of {shown} does not decode: {e}"))?;
        if again != msg {
            return Err(format!("re-encoding changed {shown} into {again:?}"));
        }
        let mut second = Vec::new();
        again.encode(&mut second);
        if second != first {
            return Err(format!("encoding of {shown} is not stable"));
        }
    }
    Ok(())
}

/// The RFC 4515 filter parser on arbitrary text: it never panics; what it
/// accepts is valid BER within the depth it was given; and printing that
/// filter and parsing the print gives the same filter.
pub fn check_filter_string(data: &[u8]) -> Result<(), String> {
    const DEPTH: usize = 32;
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let Ok(ber) = crate::filter_str::parse(text, DEPTH) else {
        return Ok(());
    };
    let filter = Filter::from_ber(&ber, Depth::new(DEPTH))
        .map_err(|e| format!("{text:?} parsed to BER that does not decode: {e}"))?;
    let printed = filter.to_string();
    let again = crate::filter_str::parse(&printed, DEPTH)
        .map_err(|e| format!("{text:?} printed as {printed:?}, which does not parse: {e}"))?;
    if again != ber {
        return Err(format!(
            "{text:?} printed as {printed:?}, which parses differently"
        ));
    }
    Ok(())
}

/// The RFC 4514 DN parser on arbitrary bytes: it never panics, and what
/// it accepts prints in a form that parses back to the same print.
pub fn check_dn_string(data: &[u8]) -> Result<(), String> {
    let Ok(dn) = crate::dn::SyntacticDn::parse_bytes(data) else {
        return Ok(());
    };
    let printed = dn.to_string();
    let again = crate::dn::SyntacticDn::parse(&printed).map_err(|e| {
        format!(
            "{:?} printed as {printed:?}, which does not parse: {e}",
            String::from_utf8_lossy(data)
        )
    })?;
    if again.to_string() != printed {
        return Err(format!(
            "{:?} printed as {printed:?}, which prints as {again}",
            String::from_utf8_lossy(data)
        ));
    }
    Ok(())
}
