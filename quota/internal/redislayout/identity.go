package redislayout

import "strings"

// EscapeIdentity maps any identity to a string that can stand between the
// braces of a Redis Cluster hash tag: bytes other than letters, digits and
// "-_.:@" become %XX. The mapping is one to one, so two identities never
// share keys, and "{", "}", spaces and binary bytes cannot move the tag.
// An identity with nothing to escape is returned as it is.
func EscapeIdentity(id string) string {
	i := 0
	for i < len(id) && plain(id[i]) {
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
		if plain(c) {
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
