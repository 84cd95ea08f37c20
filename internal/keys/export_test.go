package keys

// UnknownLen returns how many unknown hashes x remembers.
func UnknownLen(x *Index) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.unknown)
}
