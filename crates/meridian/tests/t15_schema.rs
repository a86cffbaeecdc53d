//! Schema at the server: cn=Subschema as clients read it, extra schema
//! files from the config and `--schema`, bad files refused at start.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use support::*;

#[test]
fn ldapsearch_reads_the_subschema_subentry() {
    let server = Server::start("");
    let out = root_dse_search(&server, &["-LLL", "subschemaSubentry"]);
    assert!(
        text(&out.stdout).contains("subschemaSubentry: cn=Subschema"),
        "{}",
        text(&out.stdout)
    );

    let out = ldap_tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-o",
            "ldif-wrap=no",
            "-H",
            &server.url(),
            "-s",
            "base",
            "-b",
            "cn=Subschema",
            "(objectClass=subschema)",
            "+",
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for expected in [
        "attributeTypes: ( 2.5.4.3 NAME ( 'cn' 'commonName' )",
        "objectClasses: ( 2.16.840.1.113730.3.2.2 NAME 'inetOrgPerson'",
        "objectClasses: ( 1.3.6.1.1.1.2.0 NAME 'posixAccount'",
        "ldapSyntaxes: ( 1.3.6.1.4.1.1466.115.121.1.15 DESC 'Directory String' )",
        "matchingRules: ( 2.5.13.2 NAME 'caseIgnoreMatch' SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )",
        "matchingRuleUse: ( 2.5.13.2 NAME 'caseIgnoreMatch' APPLIES (",
        "attributeTypes: ( 1.3.6.1.4.1.1466.101.119.3 NAME 'entryTtl'",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?}");
    }
}

#[test]
fn extra_schema_files_load_from_config_and_flag() {
    let dir = temp_dir("schema");
    let a = dir.join("a.schema");
    std::fs::write(
        &a,
        "objectidentifier testOID 1.3.6.1.4.1.99999\n\
         attributetype ( testOID:1 NAME 'fooAttr' SUP name )\n",
    )
    .unwrap();
    let b = dir.join("b.ldif");
    std::fs::write(
        &b,
        "dn: cn=b,cn=schema,cn=config\nobjectClass: olcSchemaConfig\ncn: b\n\
         olcObjectClasses: {0}( 1.3.6.1.4.1.99999.2 NAME 'fooObject' SUP top AUXILIARY MAY fooAttr )\n",
    )
    .unwrap();
    let config = format!("[directory]\nschema_files = [\"{}\"]\n", a.display());
    let mut cmd_server = Server::start_with_args(&config, &["--schema", b.to_str().unwrap()]);
    let out = ldap_tool(
        "ldapsearch",
        &[
            "-x",
            "-LLL",
            "-o",
            "ldif-wrap=no",
            "-H",
            &cmd_server.url(),
            "-s",
            "base",
            "-b",
            "cn=Subschema",
            "+",
        ],
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("attributeTypes: ( 1.3.6.1.4.1.99999.1 NAME 'fooAttr' SUP name )"),
        "{stdout}"
    );
    assert!(stdout.contains("NAME 'fooObject'"), "{stdout}");
    assert!(cmd_server.terminate().success());
}

#[test]
fn a_bad_schema_file_is_refused_with_file_line_and_reason() {
    let dir = temp_dir("badschema");
    let bad = dir.join("bad.schema");
    std::fs::write(
        &bad,
        "# comment\n\nattributetype ( 1.2.3.4 NAME 'x'\n  SUP noSuchType )\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&dir)
        .arg("--schema")
        .arg(&bad)
        .env("MERIDIAN_ADMIN_PASSWORD", "x")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:3:", bad.display())),
        "{stderr}"
    );
    assert!(stderr.contains("noSuchType"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 44, small 15: the matched values control was ignored on
/// cn=Subschema, so a client asking for one attribute type's definition
/// got them all. slapd gives just the one (checked side by side).
#[test]
fn matched_values_select_definitions_in_cn_subschema() {
    let server = Server::start("");
    let (rc, out) = tool(
        &server,
        "ldapsearch",
        &[],
        &[
            "-LLL",
            "-o",
            "ldif-wrap=no",
            "-b",
            "cn=Subschema",
            "-s",
            "base",
            "-E",
            "mv=(attributeTypes=2.5.4.3)",
            "attributeTypes",
        ],
        None,
    );
    assert_eq!(rc, 0, "{out}");
    let definitions: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("attributeTypes: "))
        .collect();
    assert_eq!(definitions.len(), 1, "{out}");
    assert!(
        definitions[0].contains("( 2.5.4.3 NAME ( 'cn' 'commonName' )"),
        "{out}"
    );
}
