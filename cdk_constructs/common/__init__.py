"""What every capability uses: the one custom-resource provider, fixed-name log groups, log retention and
removal policies, and the cdk-nag and checkov acknowledgements."""
