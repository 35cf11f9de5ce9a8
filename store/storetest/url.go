package storetest

import (
	"net/url"
	"strings"
)

// replaceDatabase returns the connection string with its database replaced.
func replaceDatabase(conn, db string) string {
	if u, err := url.Parse(conn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		return u.String()
	}
	var parts []string
	for _, kv := range strings.Fields(conn) {
		if !strings.HasPrefix(kv, "dbname=") {
			parts = append(parts, kv)
		}
	}
	return strings.Join(append(parts, "dbname="+db), " ")
}
