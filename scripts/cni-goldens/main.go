// Prints the golden ADD results podwire's plugin must reproduce byte for byte
// (test/fixtures/cni-results/goldens.json): for each stdin config, what
// upstream's istio-cni plugin writes on stdout when it passes an ADD through.
// It runs the same library calls that plugin does (istio.io/istio
// cni/pkg/plugin: parseConfig, then pluginResponse), with the result written
// to a buffer instead of stdout. Regenerate (needs Go and the module proxy):
//
//	cd scripts/cni-goldens && go run . > ../../test/fixtures/cni-results/goldens.json
//
// The containernetworking/cni version in go.mod is the one istio's go.mod pins.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/types"
	cniv1 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

var versions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// Previous results by name; "%s" is replaced by the version the result claims.
var prevResults = []struct{ name, json string }{
	{"empty", `{"cniVersion":"%s"}`},
	{"empty-dns", `{"cniVersion":"%s","dns":{}}`},
	{"empty-lists", `{"cniVersion":"%s","interfaces":[],"ips":[],"routes":[],"dns":{}}`},
	{"bridge-host-local", `{"cniVersion":"%s","interfaces":[{"name":"cni0","mac":"a2:5c:3e:1f:00:01"},` +
		`{"name":"veth1234abcd","mac":"5e:11:22:33:44:55"},{"name":"eth0","mac":"0a:58:0a:f4:00:05","sandbox":"/var/run/netns/cni-1"}],` +
		`"ips":[{"version":"4","interface":2,"address":"10.244.0.5/24","gateway":"10.244.0.1"},` +
		`{"version":"6","interface":2,"address":"fd00:10:244::5/64","gateway":"fd00:10:244::1"}],` +
		`"routes":[{"dst":"0.0.0.0/0","gw":"10.244.0.1"},{"dst":"::/0"}],"dns":{}}`},
	{"dns-full", `{"cniVersion":"%s","ips":[{"address":"10.1.2.3/16"}],` +
		`"dns":{"nameservers":["10.96.0.10"],"domain":"cluster.local","search":["default.svc.cluster.local","svc.cluster.local"],"options":["ndots:5"]}}`},
	{"dns-domain-only", `{"cniVersion":"%s","dns":{"domain":"example.com"}}`},
	{"v1-fields", `{"cniVersion":"%s","interfaces":[{"name":"eth0","mac":"0a:58:0a:f4:00:05","mtu":1450,"sandbox":"/var/run/netns/x",` +
		`"socketPath":"/run/vhost.sock","pciID":"0000:00:1f.6"}],"ips":[{"interface":0,"address":"10.0.0.7/8"}],` +
		`"routes":[{"dst":"192.168.0.0/16","gw":"10.0.0.1","mtu":1400,"advmss":1360,"priority":10,"table":100,"scope":0}]}`},
	{"unknown-fields", `{"cniVersion":"%s","extra":{"z":1,"a":[true]},"ips":[{"address":"10.0.0.8/24","note":"x"}],"dns":{"nameservers":["1.1.1.1"],"weird":1}}`},
	{"noncanonical-ips", `{"cniVersion":"%s","ips":[{"address":"FD00:0:0:0::5/64","gateway":"fd00:0::1"},{"address":"::ffff:10.1.2.3/104"},` +
		`{"address":"2001:db8:0:0:1:0:0:1/64","gateway":"::FFFF:10.0.0.1"}],"routes":[{"dst":"10.1.2.3/8"},{"dst":"::ffff:10.1.2.3/120","gw":"0:0::0"}]}`},
	{"bad-address", `{"cniVersion":"%s","ips":[{"address":"10.000.0.1/8"}]}`},
	{"bad-shape", `{"cniVersion":"%s","ips":{"address":"10.0.0.1/8"}}`},
	{"interface-index", `{"cniVersion":"%s","interfaces":[{"name":"eth0"}],"ips":[{"interface":-1,"address":"10.0.0.1/8"},{"interface":7,"address":"10.0.0.2/8"}]}`},
	{"escapes", `{"cniVersion":"%s","interfaces":[{"name":"e<t>&h\u2028\u00e9\ud83d\ude00\"\\\n","sandbox":"/x y"}],"dns":{"search":["a<b>","c&d"]}}`},
	{"missing-address", `{"cniVersion":"%s","ips":[{"gateway":"10.0.0.1"}],"routes":[{"gw":"10.0.0.1"}]}`},
	{"nulls", `{"cniVersion":"%s","interfaces":null,"ips":[{"interface":null,"address":"10.0.0.1/8","gateway":null}],"routes":null,"dns":null}`},
	{"key-case", `{"cniVersion":"%s","IPs":[{"Address":"10.0.0.1/8","GATEWAY":"10.0.0.254"}],"Dns":{"Domain":"x"}}`},
	{"bad-mtu", `{"cniVersion":"%s","interfaces":[{"name":"eth0","mtu":1.5}]}`},
	{"wrong-ip-version", `{"cniVersion":"%s","interfaces":[{"name":""}],"ips":[{"version":"4","address":"fd00::1/64"}]}`},
	{"no-version-field", `{"ips":[{"address":"10.0.0.9/24"}]}`},
}

type netConf struct {
	types.NetConf
}

type golden struct {
	Name   string  `json:"name"`
	Stdin  string  `json:"stdin"`
	Stdout *string `json:"stdout,omitempty"` // what the plugin prints, when it succeeds
	Error  *string `json:"error,omitempty"`  // the plugin fails instead (CNI error)
}

// run is istio-cni's parseConfig + pluginResponse with stdout captured.
func run(stdin []byte) (string, error) {
	conf := netConf{}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return "", fmt.Errorf("failed to parse network configuration: %v", err)
	}
	var prev *cniv1.Result
	if conf.RawPrevResult != nil {
		resultBytes, err := json.Marshal(conf.RawPrevResult)
		if err != nil {
			return "", fmt.Errorf("could not serialize prevResult: %v", err)
		}
		res, err := version.NewResult(conf.CNIVersion, resultBytes)
		if err != nil {
			return "", fmt.Errorf("could not parse prevResult: %v", err)
		}
		prev, err = cniv1.NewResultFromResult(res)
		if err != nil {
			return "", fmt.Errorf("could not convert result to current version: %v", err)
		}
	}
	if prev == nil {
		prev = &cniv1.Result{CNIVersion: cniv1.ImplementedSpecVersion}
	}
	out, err := prev.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := out.PrintTo(&buf); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func main() {
	var cases []golden
	add := func(name, stdin string) {
		g := golden{Name: name, Stdin: stdin}
		if out, err := run([]byte(stdin)); err != nil {
			msg := err.Error()
			g.Error = &msg
		} else {
			g.Stdout = &out
		}
		cases = append(cases, g)
	}
	for _, cv := range versions {
		base := fmt.Sprintf(`{"cniVersion":"%s","name":"k8s-pod-network","type":"istio-cni"`, cv)
		add(cv+"/no-prevResult", base+"}")
		add(cv+"/null-prevResult", base+`,"prevResult":null}`)
		for _, p := range prevResults {
			for _, pv := range versions {
				prev := p.json
				if bytes.Contains([]byte(prev), []byte("%s")) {
					prev = fmt.Sprintf(prev, pv)
				} else if pv != cv {
					continue
				}
				add(fmt.Sprintf("%s/%s@%s", cv, p.name, pv), base+`,"prevResult":`+prev+"}")
			}
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	doc := map[string]any{
		"generator": "scripts/cni-goldens (go run .): istio-cni's parseConfig + pluginResponse, containernetworking/cni v1.3.0",
		"cases":     cases,
	}
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
