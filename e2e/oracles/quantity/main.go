// Command quantity is the oracle of Gangplank's quantity fuzz test (tests/quantity_fuzz.rs):
// for each line of standard input it prints how Kubernetes' own parser
// (k8s.io/apimachinery/pkg/api/resource.ParseQuantity) reads it, one line out per line in:
// "ok <millis> <units>", the exact amount rounded up (towards positive infinity) to whole
// thousandths and to whole units, as decimal integers of any size; or "err" when Kubernetes
// refuses it. (Quantity.MilliValue and Value round the same way for positive amounts, but wrap
// around beyond int64 and round negative ones towards zero and then up.)
package main

import (
	"bufio"
	"fmt"
	"math/big"
	"os"
	"strings"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ceil is amount times 10^exponent, rounded up to an integer. Kubernetes takes exponents of
// any size ("1e999999999"), so amounts far beyond int64 are written as a 1 with 40 zeros (with
// their sign), and amounts far below one unit as the 0 or 1 they round up to, without
// computing their digits.
func ceil(amount *inf.Dec, exponent inf.Scale) string {
	unscaled := amount.UnscaledBig()
	scale := int64(amount.Scale()) - int64(exponent)
	digits := int64(len(new(big.Int).Abs(unscaled).String()))
	switch {
	case unscaled.Sign() == 0:
		return "0"
	case digits-scale > 40 && unscaled.Sign() > 0:
		return "1" + strings.Repeat("0", 40)
	case digits-scale > 40:
		return "-1" + strings.Repeat("0", 40)
	case digits-scale < -2 && unscaled.Sign() > 0:
		return "1"
	case digits-scale < -2:
		return "0"
	}
	scaled := new(inf.Dec).SetUnscaledBig(unscaled).SetScale(inf.Scale(scale))
	return new(inf.Dec).Round(scaled, 0, inf.RoundCeil).UnscaledBig().String()
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		q, err := resource.ParseQuantity(in.Text())
		if err != nil {
			fmt.Fprintln(out, "err")
			continue
		}
		amount := q.AsDec()
		fmt.Fprintf(out, "ok %s %s\n", ceil(amount, 3), ceil(amount, 0))
	}
}
