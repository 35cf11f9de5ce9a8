package project

import "regexp"

var (
	// mediaTypeRE is a lowercase concrete media type: type/subtype, no
	// wildcard, no parameters.
	mediaTypeRE = regexp.MustCompile(`^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$`)
)
