package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jobfleet/jobfleet/api"
)

func ExampleDecodeJob() {
	doc := `{
	  "id": "nightly-report",
	  "schedule": "0 2 * * *",
	  "timezone": "Europe/Berlin",
	  "executor": {"type": "http", "url": "http://127.0.0.1:9000/hook"},
	  "payload": {"report": "sales"}
	}`
	job, err := api.DecodeJob(strings.NewReader(doc), 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	job.Normalize()
	if err := job.Validate(api.DefaultLimits()); err != nil {
		fmt.Println(err)
		return
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(job)
	// Output:
	// {
	//   "id": "nightly-report",
	//   "schedule": "0 2 * * *",
	//   "timezone": "Europe/Berlin",
	//   "executor": {
	//     "type": "http",
	//     "url": "http://127.0.0.1:9000/hook",
	//     "method": "POST"
	//   },
	//   "payload": {
	//     "report": "sales"
	//   },
	//   "retry": {
	//     "max_attempts": 1,
	//     "initial_backoff": "1s",
	//     "max_backoff": "1m"
	//   },
	//   "timeout": "1h",
	//   "concurrency_policy": "allow",
	//   "misfire_policy": "run_once",
	//   "paused": false,
	//   "partition": 0
	// }
}

func ExampleJob_Validate() {
	job := api.Job{
		ID:       "cleanup",
		Schedule: "0 0 30 2 *",
		Executor: api.Executor{Type: api.ExecutorShell, Command: []string{"rm", "-rf", "/tmp/cache"}},
	}
	err := job.Validate(api.DefaultLimits())
	fmt.Println(err)

	var fe *api.FieldError
	if errors.As(err, &fe) {
		fmt.Println("field:", fe.Field)
	}
	fmt.Println("invalid job:", errors.Is(err, api.ErrInvalidJob))
	// Output:
	// schedule: "0 0 30 2 *" never fires: it names no existing date
	// field: schedule
	// invalid job: true
}

func ExampleEscapeID() {
	id := "team a/report 100%"
	key := "/jobfleet/jobs/" + api.EscapeID(id)
	fmt.Println(key)

	back, err := api.UnescapeID(strings.TrimPrefix(key, "/jobfleet/jobs/"))
	fmt.Println(back, err)
	// Output:
	// /jobfleet/jobs/team%20a%2Freport%20100%25
	// team a/report 100% <nil>
}

// A header value and a payload value that are secret references: the job
// document holds only the variables' names; a worker resolves them.
func ExampleResolveSecretRefs() {
	payload := json.RawMessage(`{"repo":"shop","api_key":{"secret_env":"SHOP_API_KEY"}}`)
	names, _ := api.SecretRefs("payload", payload)
	fmt.Println(names)

	env := map[string]string{"SHOP_API_KEY": "k-123"} // the worker's allowed variables
	resolved, err := api.ResolveSecretRefs("payload", payload, func(name string) (string, error) {
		v, ok := env[name]
		if !ok {
			return "", fmt.Errorf("variable %s is not set", name)
		}
		return v, nil
	})
	fmt.Println(string(resolved), err)
	// Output:
	// [SHOP_API_KEY]
	// {"repo":"shop","api_key":"k-123"} <nil>
}

// Readers without write access see literal header values redacted, and
// references as they are.
func ExampleJob_Redacted() {
	j := api.Job{ID: "deploy", Executor: api.Executor{Type: api.ExecutorHTTP, URL: "https://hooks.example.com/deploy",
		Headers: map[string]api.HeaderValue{
			"Authorization": api.Literal("Bearer abc123"),
			"X-Api-Key":     api.SecretEnv("DEPLOY_KEY"),
		}}}
	b, _ := json.Marshal(j.Redacted().Executor.Headers)
	fmt.Println(string(b))
	// Output: {"Authorization":"\u003credacted\u003e","X-Api-Key":{"secret_env":"DEPLOY_KEY"}}
}
