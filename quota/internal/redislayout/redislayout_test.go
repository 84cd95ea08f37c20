package redislayout

import (
	"slices"
	"strings"
	"testing"
)

func TestEscapeIdentityIsOneToOne(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"a", "a ", "a%20", "a%2520", "{a}", "%7Ba%7D", "a:b", "a\x00", "a\x01", "ä"} {
		e := EscapeIdentity(id)
		if prev, dup := seen[e]; dup {
			t.Errorf("%q and %q both escape to %q", prev, id, e)
		}
		for _, r := range e {
			if r == '{' || r == '}' || r < 0x21 || r > 0x7e {
				t.Errorf("escape(%q) = %q holds %q", id, e, r)
			}
		}
		seen[e] = id
	}
}

// A string that is no log is an error, not an empty log.
func TestParseRejects(t *testing.T) {
	for _, bad := range []string{"", "1234567", "12345678", strings.Repeat("\x00", 200)} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
}

// keysOf returns every key a store writes for identity: its log, its
// counters and an overdraft charge's marks (the log's key, ":overdraft:"
// and a token: such ids as "l4" and "c3" too).
func keysOf(identity string) []string {
	log := LogKey("q:", identity)
	return []string{log, CountersKey("q:", identity), log + ":overdraft:l4", log + ":overdraft:c3", log + ":overdraft:x"}
}

// hashTag returns what Redis Cluster hashes of key: the text between its
// first "{" and the first "}" after it, when not empty; else all of it.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// checkKeys fails if two of ids (distinct identities) share a key, or if
// a member identity's keys are not in its group's slot (groups maps
// members to their groups, plain identities: a group that is itself a
// member identity is not in its own members' slot).
func checkKeys(t *testing.T, ids []string, groups map[string]string) {
	t.Helper()
	owner := map[string]string{}
	for _, id := range ids {
		for _, k := range keysOf(id) {
			if prev, ok := owner[k]; ok && prev != id {
				t.Errorf("%q and %q share the key %q", prev, id, k)
			}
			owner[k] = id
		}
	}
	for id, group := range groups {
		for _, k := range keysOf(id) {
			if got, want := hashTag(k), hashTag(LogKey("q:", group)); got != want {
				t.Errorf("%q (of group %q): key %q hashes %q, the group's %q", id, group, k, got, want)
			}
		}
	}
}

// Member identities and plain ones never share a key, whatever their
// bytes, nor do an identity's keys and another's overdraft marks; a
// member's keys take its group's hash tag; and a plain identity's keys
// are what they were before members existed.
func TestMemberKeys(t *testing.T) {
	groups := map[string]string{}
	ids := []string{"a", "a ", "{a}", "{a}b", "{a}:l4", "{a}b:l4", "{}", "{}x", "%7Ba%7D", "{a b}c", "{%}", "key:42"}
	for _, gm := range [][2]string{
		{"a", ""}, {"a", "b"}, {"a:b", "c"}, {"a", "b:c"}, {"a", "b:l4"}, {"a", "b:l4:overdraft"}, {"a b", "c"},
		{"{a}", "b"}, {"a}", "b"}, {"a", "}b"}, {"a", "/b"}, {"a/", "b"}, {"a%", "b"}, {"customer:7", "key:42"},
	} {
		m := Member(gm[0], gm[1])
		if tag, member, ok := SplitMember(m); !ok || tag != EscapeIdentity(gm[0]) || member != gm[1] {
			t.Errorf("SplitMember(Member(%q, %q)) = %q, %q, %v", gm[0], gm[1], tag, member, ok)
		}
		ids = append(ids, m)
		if _, _, member := SplitMember(gm[0]); !member {
			groups[m] = gm[0]
		}
	}
	checkKeys(t, ids, groups)
	for id, want := range map[string]string{"key:42": "q:{key:42}:l5", "a b": "q:{a%20b}:l5", "{a b}c": "q:{%7Ba%20b%7Dc}:l5"} {
		if got := LogKey("q:", id); got != want {
			t.Errorf("LogKey(%q) = %q, want %q as before", id, got, want)
		}
	}
	if got := LogKey("q:", Member("customer:7", "key:42")); got != "q:{customer:7}/key%3A42:l5" {
		t.Errorf("a member's log is at %q", got)
	}
}

func FuzzMemberKeys(f *testing.F) {
	f.Add("customer:7", "key:42", "{customer:7}key:42")
	f.Add("a", "b:l4:overdraft", "b")
	f.Fuzz(func(t *testing.T, group, member, other string) {
		ids := []string{group, member, other, Member(group, member), Member(group, other), Member(other, member)}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		groups := map[string]string{}
		if _, _, isMember := SplitMember(group); group != "" && !isMember {
			groups[Member(group, member)] = group
		}
		checkKeys(t, ids, groups)
	})
}
