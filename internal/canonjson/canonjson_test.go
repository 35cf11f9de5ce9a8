package canonjson

import "testing"

func TestTransformOrdersMembersAndNumbers(t *testing.T) {
	got, err := Transform([]byte(`{"b": 1.50, "a": [true, null, "\u00e9"], "c": 1e2}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":[true,null,"é"],"b":1.5,"c":100}`
	if string(got) != want {
		t.Fatalf("Transform = %s, want %s", got, want)
	}
}

func TestDigestIsStableAcrossMemberOrder(t *testing.T) {
	d1, err := Digest(map[string]any{"x": 1, "y": "z"})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Transform([]byte(`{"y":"z","x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if d1 != DigestBytes(d2) {
		t.Fatalf("digests differ: %s vs %s", d1, DigestBytes(d2))
	}
	if len(d1) != len("sha256:")+64 {
		t.Fatalf("digest %q has the wrong shape", d1)
	}
}

func TestTransformRejectsInvalidJSON(t *testing.T) {
	if _, err := Transform([]byte(`{"a":`)); err == nil {
		t.Fatal("want an error for truncated JSON")
	}
}
