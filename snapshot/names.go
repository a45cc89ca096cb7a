package snapshot

import "strings"

// escapeName encodes one path element for a layer (see the package
// comment): a name that starts with ".wh." or with the escape gets the
// escape in front.
func escapeName(c string) string {
	if strings.HasPrefix(c, whiteoutPrefix) || strings.HasPrefix(c, escapePrefix) {
		return escapePrefix + c
	}
	return c
}

// unescapeName decodes an escaped element; ok is false for one WriteLayer
// would not have written (an escape in front of a name that needs none).
func unescapeName(c string) (name string, ok bool) {
	name, ok = strings.CutPrefix(c, escapePrefix)
	if !ok {
		return c, true
	}
	return name, strings.HasPrefix(name, whiteoutPrefix) || strings.HasPrefix(name, escapePrefix)
}

// escapePath escapes every element of a slash-separated relative path.
func escapePath(rel string) string {
	if !strings.Contains(rel, whiteoutPrefix) && !strings.Contains(rel, escapePrefix) {
		return rel
	}
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		parts[i] = escapeName(p)
	}
	return strings.Join(parts, "/")
}
