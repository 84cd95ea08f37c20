package quota

import "strings"

// escapeIdentity maps any identity to a string that can stand between the
// braces of a Redis Cluster hash tag: bytes other than letters, digits and
// "-_.:@" become %XX. The mapping is one to one, so two identities never
// share keys, and "{", "}", spaces and binary bytes cannot move the tag.
func escapeIdentity(id string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(id))
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == ':' || c == '@' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
