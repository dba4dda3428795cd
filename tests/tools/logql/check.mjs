// Parses each LogQL expression (one JSON string a line on stdin) with Grafana's LogQL grammar
// (@grafana/lezer-logql, the parser of Grafana's Loki query editor) and prints, per line, a
// JSON list of the error positions (empty: the expression parses).
import { parser } from '@grafana/lezer-logql';
import { createInterface } from 'node:readline';

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const expr = JSON.parse(line);
  const errors = [];
  parser.parse(expr).iterate({
    enter: (node) => {
      if (node.type.isError) errors.push({ from: node.from, near: expr.slice(node.from, node.from + 20) });
    },
  });
  console.log(JSON.stringify(errors));
}
