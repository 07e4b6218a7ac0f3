"""The jsii start-up floor: a CDK app with one S3 bucket (compared against in synth_benchmark)."""

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

app = cdk.App()
s3.Bucket(cdk.Stack(app, "Floor"), "Bucket")
app.synth()
