package redislayout

import "strings"

// EscapeIdentity maps any identity to a string that can stand between the
// braces of a Redis Cluster hash tag: bytes other than letters, digits and
// "-_.:@" become %XX. The mapping is one to one, so two identities never
// share keys, and "{", "}", spaces and binary bytes cannot move the tag.
// An identity with nothing to escape is returned as it is.
func EscapeIdentity(id string) string { return escape(id, plain) }

// Member returns the identity of member within group: "{", group as
// EscapeIdentity escapes it, "}", then member as it is. Its keys (LogKey,
// CountersKey) take the group's hash tag, the tag of group's own keys
// when group is a plain identity (not itself a member identity).
func Member(group, member string) string { return "{" + EscapeIdentity(group) + "}" + member }

// SplitMember returns the tag and the member of a member identity: one
// that starts with "{", then text EscapeIdentity may write (letters,
// digits and "-_.:@%"), then "}". Every identity Member returns is one;
// ok is false for any other identity.
func SplitMember(id string) (tag, member string, ok bool) {
	if len(id) < 2 || id[0] != '{' {
		return "", "", false
	}
	for i := 1; i < len(id); i++ {
		switch c := id[i]; {
		case c == '}':
			return id[1:i], id[i+1:], true
		case !plain(c) && c != '%':
			return "", "", false
		}
	}
	return "", "", false
}

// escape returns id with every byte keep refuses as %XX.
func escape(id string, keep func(byte) bool) string {
	i := 0
	for i < len(id) && keep(id[i]) {
		i++
	}
	if i == len(id) {
		return id
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(id) + 8)
	b.WriteString(id[:i])
	for ; i < len(id); i++ {
		c := id[i]
		if keep(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == ':' || c == '@'
}

// plainMember is plain without ":": a member escaped so has no colon, so
// nothing a key adds after it (":l5", ":c3", ":l5:overdraft:...") can be
// read as part of another member.
func plainMember(c byte) bool { return c != ':' && plain(c) }

// Key returns the key of identity under prefix, ending in suffix: the
// escaped identity as the hash tag, or, for a member identity, its tag,
// "/" and the escaped member. Every key of an identity, its in-flight
// leases' too, is in one Redis Cluster slot.
func Key(prefix, identity, suffix string) string {
	if tag, member, ok := SplitMember(identity); ok {
		return prefix + "{" + tag + "}/" + escape(member, plainMember) + suffix
	}
	return prefix + "{" + EscapeIdentity(identity) + "}" + suffix
}
