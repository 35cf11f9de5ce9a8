package envconfig

import (
	"reflect"
	"strings"
	"testing"
)

type listener struct {
	Address string `yaml:"address"`
	Port    int    `yaml:"port"`
	Drain   *int   `yaml:"drainSeconds"`
}

type authority struct {
	Endpoint string `yaml:"endpoint"`
	Client   struct {
		KeyRef string `yaml:"keyRef"`
	} `yaml:"client"`
}

type config struct {
	Version   int                   `yaml:"version"`
	Listener  listener              `yaml:"listener"`
	Metrics   *listener             `yaml:"metrics"`
	JWKSURL   string                `yaml:"jwksUrl"`
	Revoked   []string              `yaml:"revokedKeyIds"`
	Limit     *uint16               `yaml:"maximumRequestBytes"`
	Strict    bool                  `yaml:"activateOnStart"`
	Reviewers map[string]*authority `yaml:"reviewAuthorities"`
	Byvalue   map[string]authority  `yaml:"executors"`
	hidden    string
}

const prefix = "REGISTRUM_CONFIG_"

func TestApplySetsEveryKindOfKey(t *testing.T) {
	c := config{Version: 1, Listener: listener{Address: "127.0.0.1", Port: 8080},
		Reviewers: map[string]*authority{"desk-1": {Endpoint: "http://a"}},
		Byvalue:   map[string]authority{"exec": {Endpoint: "http://b"}}}
	env := []string{
		"PATH=/bin",
		prefix + "LISTENER_PORT=9090",
		prefix + "LISTENER_DRAIN_SECONDS=0",
		prefix + "METRICS_ADDRESS=10.0.0.1",
		prefix + "JWKS_URL=https://issuer.example/jwks",
		prefix + "REVOKED_KEY_IDS=a, b,c",
		prefix + "MAXIMUM_REQUEST_BYTES=4096",
		prefix + "ACTIVATE_ON_START=true",
		prefix + "REVIEW_AUTHORITIES_DESK_1_ENDPOINT=https://desk",
		prefix + "REVIEW_AUTHORITIES_DESK_1_CLIENT_KEY_REF=desk.jwk",
		prefix + "EXECUTORS_EXEC_ENDPOINT=https://exec",
		"REGISTRUM_HOST_BENCH=1", // another prefix: not ours
	}
	got, err := Apply(&c, prefix, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listener.Port != 9090 || c.Listener.Address != "127.0.0.1" || c.Listener.Drain == nil || *c.Listener.Drain != 0 {
		t.Errorf("listener = %+v", c.Listener)
	}
	if c.Metrics == nil || c.Metrics.Address != "10.0.0.1" || c.Metrics.Port != 0 {
		t.Errorf("metrics section not created from the environment: %+v", c.Metrics)
	}
	if c.JWKSURL != "https://issuer.example/jwks" || !reflect.DeepEqual(c.Revoked, []string{"a", "b", "c"}) || c.Limit == nil || *c.Limit != 4096 || !c.Strict {
		t.Errorf("scalars: %+v", c)
	}
	if r := c.Reviewers["desk-1"]; r.Endpoint != "https://desk" || r.Client.KeyRef != "desk.jwk" {
		t.Errorf("pointer map entry: %+v", r)
	}
	if c.Byvalue["exec"].Endpoint != "https://exec" {
		t.Errorf("value map entry: %+v", c.Byvalue["exec"])
	}
	var paths []string
	for _, o := range got {
		paths = append(paths, o.Path)
	}
	want := "activateOnStart executors.exec.endpoint jwksUrl listener.drainSeconds listener.port maximumRequestBytes metrics.address reviewAuthorities.desk-1.client.keyRef reviewAuthorities.desk-1.endpoint revokedKeyIds"
	if strings.Join(paths, " ") != want {
		t.Errorf("overrides:\n got %s\nwant %s", strings.Join(paths, " "), want)
	}
}

func TestApplyRefusesAndChangesNothing(t *testing.T) {
	for name, env := range map[string]string{
		"misspelled key":        prefix + "LISTNER_PORT=1",
		"undeclared map entry":  prefix + "REVIEW_AUTHORITIES_OTHER_ENDPOINT=x",
		"unexported field":      prefix + "HIDDEN=x",
		"not an integer":        prefix + "LISTENER_PORT=80a",
		"out of range":          prefix + "MAXIMUM_REQUEST_BYTES=70000",
		"not a boolean":         prefix + "ACTIVATE_ON_START=yes please",
		"a section, not a leaf": prefix + "LISTENER=x",
	} {
		t.Run(name, func(t *testing.T) {
			c := config{Listener: listener{Port: 8080}, Reviewers: map[string]*authority{"desk": {}}}
			before := c
			_, err := Apply(&c, prefix, []string{prefix + "JWKS_URL=set-first", env})
			if err == nil {
				t.Fatal("accepted")
			}
			variable, _, _ := strings.Cut(env, "=")
			if !strings.Contains(err.Error(), variable) {
				t.Errorf("the error does not name the variable: %v", err)
			}
			if c.JWKSURL != "" || c.Listener != before.Listener {
				t.Errorf("a refused environment changed the configuration: %+v", c)
			}
		})
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"jwksUrl": "JWKS_URL", "maximumRequestBytes": "MAXIMUM_REQUEST_BYTES", "hashKeyRef": "HASH_KEY_REF", "version": "VERSION", "p2pPort": "P2P_PORT"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
