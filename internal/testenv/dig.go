package testenv

// Dig walks decoded JSON (maps and slices, as encoding/json decodes into any) by
// keys and indexes; it is nil where the path leads nowhere.
func Dig(m any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			mm, _ := m.(map[string]any)
			m = mm[k]
		case int:
			l, _ := m.([]any)
			if k >= len(l) {
				return nil
			}
			m = l[k]
		}
	}
	return m
}
