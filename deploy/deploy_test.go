package deploy

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// compose is the part of a compose file these tests read.
type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Restart string `yaml:"restart"`
	} `yaml:"services"`
}

func readCompose(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

func TestComposeWiring(t *testing.T) {
	c := readCompose(t)
	for _, name := range []string{"redis", "postgis", "migrate", "load", "tileapi"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("no service %q", name)
		}
	}
	if img := c.Services["redis"].Image; !strings.HasPrefix(img, "redis:7") {
		t.Errorf("redis image %q, want redis:7", img)
	}
	// The quotas' day and month counters survive a restart (an
	// append-only file synced every second, in a volume), and no key of
	// theirs is evicted.
	cmd := strings.Join(c.Services["redis"].Command, " ")
	for _, want := range []string{"--appendonly yes", "--appendfsync everysec", "--maxmemory-policy noeviction"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("redis command %q lacks %s", cmd, want)
		}
	}
	if !slices.ContainsFunc(c.Services["redis"].Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") }) {
		t.Errorf("redis volumes %v: want one at /data, where its append-only file is", c.Services["redis"].Volumes)
	}
	if img := c.Services["postgis"].Image; !strings.HasPrefix(img, "postgis/postgis:15-3.4") {
		t.Errorf("postgis image %q, want postgis/postgis:15-3.4", img)
	}

	// The long-running services report their health; the jobs run to
	// completion instead.
	for name, test := range map[string]string{
		"redis":   "redis-cli ping",
		"postgis": "pg_isready",
		"tileapi": "/tileapi healthcheck",
	} {
		hc := c.Services[name].Healthcheck
		if hc == nil || !strings.Contains(strings.Join(hc.Test, " "), test) {
			t.Errorf("service %s: healthcheck %v, want one running %q", name, hc, test)
		}
	}

	// Start order: databases healthy, then migrate, load, serve.
	wantDeps := map[string]map[string]string{
		"migrate": {"postgis": "service_healthy"},
		"load":    {"migrate": "service_completed_successfully"},
		"tileapi": {"redis": "service_healthy", "postgis": "service_healthy", "load": "service_completed_successfully"},
	}
	for svc, deps := range wantDeps {
		got := c.Services[svc].DependsOn
		for dep, cond := range deps {
			if got[dep].Condition != cond {
				t.Errorf("%s depends_on %s: condition %q, want %q", svc, dep, got[dep].Condition, cond)
			}
		}
	}
	for svc, cmd := range map[string]string{"migrate": "migrate", "load": "load", "tileapi": "serve"} {
		s := c.Services[svc]
		if s.Build == nil || s.Image != c.Services["tileapi"].Image || !slices.Equal(s.Command, []string{cmd}) {
			t.Errorf("%s: build %v image %q command %v; want the tileapi build running %q", svc, s.Build, s.Image, s.Command, cmd)
		}
		if svc != "tileapi" && s.Restart != "no" {
			t.Errorf("%s is a one-shot job: restart %q, want \"no\"", svc, s.Restart)
		}
	}

	// Every URL names a service of the file, and the database URLs agree.
	env := c.Services["tileapi"].Environment
	if env["REDIS_URL"] != "redis://redis:6379/0" {
		t.Errorf("tileapi REDIS_URL %q, want redis://redis:6379/0", env["REDIS_URL"])
	}
	db := env["DATABASE_URL"]
	if !regexp.MustCompile(`^postgres://[^@]+@postgis:5432/`).MatchString(db) {
		t.Errorf("tileapi DATABASE_URL %q, want one at postgis:5432", db)
	}
	for _, job := range []string{"migrate", "load"} {
		if got := c.Services[job].Environment["DATABASE_URL"]; got != db {
			t.Errorf("%s DATABASE_URL %q, want tileapi's %q", job, got, db)
		}
	}
	pg := c.Services["postgis"].Environment
	if want := "postgres://" + pg["POSTGRES_USER"] + ":" + pg["POSTGRES_PASSWORD"] + "@postgis:5432/" + pg["POSTGRES_DB"] + "?"; !strings.HasPrefix(db, want) {
		t.Errorf("DATABASE_URL %q does not match the postgis service's user, password and database (%s)", db, want)
	}
	if !strings.Contains(env["TILEAPI_DEMO_KEYS"], "demo-free:free") {
		t.Errorf("TILEAPI_DEMO_KEYS %q: the README's demo key demo-free is missing", env["TILEAPI_DEMO_KEYS"])
	}
	if !slices.Contains(c.Services["tileapi"].Ports, "127.0.0.1:8080:8080") || env["TILEAPI_ADDR"] != ":8080" {
		t.Errorf("tileapi ports %v, TILEAPI_ADDR %q: want 127.0.0.1:8080:8080 and :8080", c.Services["tileapi"].Ports, env["TILEAPI_ADDR"])
	}
	if !slices.Contains(c.Services["tileapi"].Ports, "127.0.0.1:8081:8081") || env["TILEAPI_ADMIN_ADDR"] != ":8081" {
		t.Errorf("tileapi ports %v, TILEAPI_ADMIN_ADDR %q: want the admin listener on :8081, published on 127.0.0.1:8081 only", c.Services["tileapi"].Ports, env["TILEAPI_ADMIN_ADDR"])
	}
	if _, ok := c.Services["postgis"]; ok && len(c.Services["postgis"].Ports) > 0 {
		t.Errorf("postgis publishes %v: it is not meant to be reached from the host", c.Services["postgis"].Ports)
	}
}

// The Compose file is safe by default: every published port is on
// loopback; the admin token has no default; the demo keys, which it writes
// into the database, are on the free plan, and it says it means to write
// them there.
func TestComposeSafeByDefault(t *testing.T) {
	c := readCompose(t)
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %q on every interface: want 127.0.0.1:host:container", name, p)
			}
		}
	}
	env := c.Services["tileapi"].Environment
	if token, ok := env["TILEAPI_ADMIN_TOKEN"]; ok && token != "${TILEAPI_ADMIN_TOKEN}" && token != "${TILEAPI_ADMIN_TOKEN:-}" {
		t.Errorf("TILEAPI_ADMIN_TOKEN %q: want no default, the admin API off unless the operator sets a token", token)
	}
	for _, kv := range strings.Split(env["TILEAPI_DEMO_KEYS"], ",") {
		if _, plan, _ := strings.Cut(strings.TrimSpace(kv), ":"); plan != "free" {
			t.Errorf("demo key %q: want the free plan only, since a demo key is published and the database keeps it", kv)
		}
	}
	if env["TILEAPI_DEMO_KEYS"] != "" && env["DATABASE_URL"] != "" && env["TILEAPI_DEMO_KEYS_IN_DATABASE"] != "1" {
		t.Errorf("demo keys with a database and TILEAPI_DEMO_KEYS_IN_DATABASE %q: tileapi refuses to start", env["TILEAPI_DEMO_KEYS_IN_DATABASE"])
	}
}

// No deployment file carries an admin token, nor the old default.
func TestNoDefaultAdminToken(t *testing.T) {
	files, err := filepath.Glob("../deploy/standins/*/*")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../docker-compose.yml", "../Dockerfile", "../.ci/containers", "../README.md", "../docs/operations.md")
	// A token set to a value: TILEAPI_ADMIN_TOKEN=x, TILEAPI_ADMIN_TOKEN: x,
	// ${TILEAPI_ADMIN_TOKEN:-x}, -admin-token x.
	set := regexp.MustCompile(`TILEAPI_ADMIN_TOKEN(=|: |:-)[A-Za-z0-9]|-admin-token[ =][A-Za-z0-9]|change-me`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := set.FindString(line); m != "" {
				t.Errorf("%s:%d sets an admin token (%q): %s", f, i+1, m, strings.TrimSpace(line))
			}
		}
	}
}

// stage is one FROM ... block of a Dockerfile.
type stage struct {
	from  string
	lines []string // instructions, continuation lines joined
}

func readDockerfile(t *testing.T) []stage {
	t.Helper()
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	sc := bufio.NewScanner(f)
	var cont string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cont += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, cont = cont+line, ""
		if fields := strings.Fields(line); strings.EqualFold(fields[0], "FROM") {
			stages = append(stages, stage{from: fields[1]})
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %q before the first FROM", line)
		}
		stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

func TestDockerfile(t *testing.T) {
	stages := readDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a builder and a final stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(build.from, "golang:") {
		t.Errorf("builder FROM %s, want golang", build.from)
	}
	if !slices.ContainsFunc(build.lines, func(l string) bool {
		return strings.HasPrefix(l, "RUN ") && strings.Contains(l, "CGO_ENABLED=0") && strings.Contains(l, "go build") && strings.Contains(l, "./cmd/tileapi")
	}) {
		t.Errorf("no RUN CGO_ENABLED=0 go build ./cmd/tileapi in the builder: %q", build.lines)
	}
	if final.from != "scratch" && !strings.HasPrefix(final.from, "gcr.io/distroless/static") {
		t.Errorf("final FROM %s, want scratch or gcr.io/distroless/static", final.from)
	}
	var user string
	for _, l := range final.lines {
		if u, ok := strings.CutPrefix(l, "USER "); ok {
			user = strings.TrimSpace(u)
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "root" || uid == "0" {
		t.Errorf("final stage USER %q, want a non-root user", user)
	}
	if !slices.ContainsFunc(final.lines, func(l string) bool { return strings.HasPrefix(l, "COPY --from=") && strings.Contains(l, "/tileapi") }) {
		t.Errorf("final stage copies no /tileapi from the builder: %q", final.lines)
	}
}

// TestStaticBinary builds tileapi as the Dockerfile does and checks that it
// asks for no dynamic loader, so it runs in an image without libc.
func TestStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "tileapi")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/tileapi")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the binary has a %v segment: it is not static", p.Type)
		}
	}
}
