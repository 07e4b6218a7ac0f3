// Print the CloudFormation diff between two template files, the way `cdk diff` does,
// using the CDK CLI's own diff library (@aws-cdk/cloudformation-diff): no AWS access.
// Usage: node devtools/template_diff.js <old.template.json|-> <new.template.json|->
// Exit code: 0 no differences, 3 differences.
const fs = require("fs");
const { fullDiff, formatDifferences } = require("@aws-cdk/cloudformation-diff");

const load = (path) => (path && path !== "-" && fs.existsSync(path) ? JSON.parse(fs.readFileSync(path, "utf8")) : {});
const [oldPath, newPath] = process.argv.slice(2);
const diff = fullDiff(load(oldPath), load(newPath));
if (diff.isEmpty) {
  process.stdout.write("There were no differences\n");
  process.exit(0);
}
formatDifferences(process.stdout, diff);
process.exit(3);
