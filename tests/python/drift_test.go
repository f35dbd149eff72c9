package python

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/engramhq/engram/gen/engram/v1" // registers engram.v1
)

// describePython prints what clients/python declares: each dataclass's JSON field
// names, each enum's values and each Client method's parameters.
const describePython = `
import dataclasses, enum, inspect, json
import engram, engram.types as t
from engram import _wire
out = {"messages": {}, "enums": {}, "methods": {}}
for name, obj in vars(t).items():
    if isinstance(obj, type) and dataclasses.is_dataclass(obj):
        out["messages"][name] = [_wire.json_name(f) for f in dataclasses.fields(obj)]
    elif isinstance(obj, type) and issubclass(obj, enum.Enum) and obj.__module__ == t.__name__ and not name.startswith("_"):
        out["enums"][name] = [m.value for m in obj]
for name, fn in inspect.getmembers(engram.Client, inspect.isfunction):
    if not name.startswith("_"):
        out["methods"][name] = list(inspect.signature(fn).parameters)
print(json.dumps(out))
`

// requestMethods says which Client methods take each request message's fields as
// parameters (IngestRequest's event and events are the two methods' first ones).
var requestMethods = map[string][]string{
	"IngestRequest":         {"ingest", "ingest_batch"},
	"RecallRequest":         {"recall"},
	"GetFactRequest":        {"get_fact"},
	"ListFactsRequest":      {"list_facts"},
	"FactHistoryRequest":    {"fact_history"},
	"InvalidateFactRequest": {"invalidate_fact"},
	"ForgetRequest":         {"forget"},
	"ListPendingRequest":    {"list_pending"},
	"DecideRequest":         {"decide"},
	"StartTaskRequest":      {"start_task"},
	"PlanOp":                {"plan_task"},
	"RequestConfirmationOp": {"request_confirmation"},
	"ConfirmOp":             {"confirm_task"},
	"CompleteOp":            {"complete_task"},
	"CancelOp":              {"cancel_task"},
	"RunStepRequest":        {"run_step"},
	"GetTaskRequest":        {"get_task"},
}

// TestPythonTypesMatchProto is the Python client's drift check (its types are
// written by hand, not generated): every field of every message it models, every
// enum value and every request field must be in clients/python, and nothing there
// may name a field the proto does not have. A proto change fails here with what to
// add to clients/python/src/engram (types.py, client.py).
func TestPythonTypesMatchProto(t *testing.T) {
	root := repoRootOf(t)
	cmd := exec.Command(python, "-c", describePython)
	cmd.Env = pythonEnv([]string{"PYTHONPATH=" + filepath.Join(root, "clients", "python", "src")})
	out, err := cmd.Output()
	require.NoError(t, err, "describe clients/python: %s", out)
	var py struct {
		Messages map[string][]string `json:"messages"`
		Enums    map[string][]string `json:"enums"`
		Methods  map[string][]string `json:"methods"`
	}
	require.NoError(t, json.Unmarshal(out, &py))
	require.NotEmpty(t, py.Messages)

	var problems []string
	for name, fields := range py.Messages {
		md := message(t, name)
		have := set(fields)
		for i := 0; i < md.Fields().Len(); i++ {
			f := md.Fields().Get(i)
			if !have[f.JSONName()] {
				problems = append(problems, "types.py: "+name+" lacks "+string(f.Name())+" ("+kind(f)+")")
			}
			delete(have, f.JSONName())
		}
		for extra := range have {
			problems = append(problems, "types.py: "+name+" has "+extra+", which engram.v1."+name+" does not")
		}
	}
	for name, values := range py.Enums {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName("engram.v1." + name))
		require.NoError(t, err, "types.py: enum %s is not in engram.v1", name)
		ed := d.(protoreflect.EnumDescriptor)
		have := set(values)
		for i := 0; i < ed.Values().Len(); i++ {
			if v := string(ed.Values().Get(i).Name()); !have[v] {
				problems = append(problems, "types.py: enum "+name+" lacks "+v)
			}
		}
	}
	for req, methods := range requestMethods {
		md := message(t, req)
		params := map[string]bool{}
		for _, m := range methods {
			ps, ok := py.Methods[m]
			require.True(t, ok, "client.py: Client has no method %s", m)
			for _, p := range ps {
				params[p] = true
			}
		}
		for i := 0; i < md.Fields().Len(); i++ {
			if f := string(md.Fields().Get(i).Name()); !params[f] {
				problems = append(problems, "client.py: "+strings.Join(methods, "/")+" takes no "+f+" ("+req+")")
			}
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		t.Fatalf("clients/python is out of date with proto/ (add these, then run go test ./tests/python):\n%s", strings.Join(problems, "\n"))
	}
}

func message(t *testing.T, name string) protoreflect.MessageDescriptor {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName("engram.v1." + name))
	require.NoError(t, err, "%s is not a message of engram.v1", name)
	md, ok := d.(protoreflect.MessageDescriptor)
	require.True(t, ok, "%s is not a message", name)
	return md
}

func kind(f protoreflect.FieldDescriptor) string {
	k := f.Kind().String()
	if f.Message() != nil {
		k = string(f.Message().FullName())
	}
	if f.IsList() {
		k = "repeated " + k
	}
	return k
}

func set(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}
