#!/usr/bin/env python3
"""Writes N inetOrgPerson users under ou=People,dc=example,dc=com as LDIF,
each with an {SSHA} userPassword of "secret" under its own salt: the data
both servers load for bench/compare/compare.sh."""

import base64
import hashlib
import random
import sys


def main():
    count = int(sys.argv[1])
    rng = random.Random(1)
    out = sys.stdout
    out.write("dn: dc=example,dc=com\nobjectClass: dcObject\nobjectClass: organization\n"
              "dc: example\no: Example\n\n")
    out.write("dn: ou=People,dc=example,dc=com\nobjectClass: organizationalUnit\nou: People\n\n")
    for i in range(count):
        salt = rng.randbytes(8)
        digest = hashlib.sha1(b"secret" + salt).digest()
        password = base64.b64encode(digest + salt).decode()
        out.write(
            f"dn: uid=user{i},ou=People,dc=example,dc=com\n"
            "objectClass: inetOrgPerson\n"
            f"uid: user{i}\ncn: User {i}\nsn: Surname{i % 997}\ngivenName: Given{i % 113}\n"
            f"mail: user{i}@example.com\ntelephoneNumber: +1 555 {i:07d}\n"
            f"employeeNumber: {i}\ndescription: initial\n"
            f"userPassword: {{SSHA}}{password}\n\n"
        )


if __name__ == "__main__":
    main()
