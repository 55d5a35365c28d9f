#!/usr/bin/env bash
# Checks the two things the cloudwise terraform tests drive for real, and says what to do when one
# is missing (exit 1), so `make test` never passes over those tests quietly:
#   1. terraform >= 1.5 on PATH (the tests are run with 1.11);
#   2. a terraform filesystem mirror holding registry.terraform.io/hashicorp/aws for linux_amd64
#      (CLOUDWISE_TF_MIRROR, else the first of /opt/tf-plugins, /usr/share/terraform/plugins,
#      ~/.terraform.d/plugins, ~/.local/share/terraform/plugins: cloudwise/testing.py's list).
# Neither can be installed from the registries this project's machines reach (PyPI, Debian, npm):
# Debian does not package terraform, and PyPI's wheels that carry a terraform binary hold 1.0.x at
# most; no registry carries the AWS provider. On this project's machines both come with the machine
# image (/usr/local/bin/terraform 1.11.4 and /opt/tf-plugins with hashicorp/aws 5.100.0). Elsewhere,
# on a machine with internet access, install terraform and fill a mirror as printed below.
set -euo pipefail
status=0

need_terraform() {
  cat >&2 <<'EOF'
  install terraform >= 1.5 (https://developer.hashicorp.com/terraform/install) and put it on PATH.
EOF
}

if ! command -v terraform >/dev/null; then
  echo "terraform: not on PATH" >&2
  need_terraform
  status=1
else
  version=$(terraform version -json 2>/dev/null | sed -n 's/.*"terraform_version": *"\([0-9.]*\)".*/\1/p')
  major=${version%%.*}
  minor=${version#*.}
  minor=${minor%%.*}
  if [ -z "$version" ] || [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -lt 5 ]; }; then
    echo "terraform: $(command -v terraform) is ${version:-of unknown version}; the tests need >= 1.5" >&2
    need_terraform
    status=1
  else
    echo "terraform: $(command -v terraform) $version"
  fi
fi

mirror=""
for candidate in "${CLOUDWISE_TF_MIRROR:-}" /opt/tf-plugins /usr/share/terraform/plugins \
  "$HOME/.terraform.d/plugins" "$HOME/.local/share/terraform/plugins"; do
  if [ -n "$candidate" ] && [ -d "$candidate/registry.terraform.io/hashicorp/aws" ]; then
    mirror=$candidate
    break
  fi
done
if [ -n "$mirror" ] && compgen -G "$mirror/registry.terraform.io/hashicorp/aws/5.*/linux_amd64/terraform-provider-aws_*" >/dev/null; then
  versions=$(cd "$mirror/registry.terraform.io/hashicorp/aws" && echo *)
  echo "provider mirror: $mirror (hashicorp/aws $versions)"
else
  echo "provider mirror: none with hashicorp/aws 5.x for linux_amd64 (looked in \$CLOUDWISE_TF_MIRROR," \
    "/opt/tf-plugins, /usr/share/terraform/plugins, ~/.terraform.d/plugins," \
    "~/.local/share/terraform/plugins)" >&2
  cat >&2 <<'EOF'
  fill one on a machine with internet access, then copy it here or point CLOUDWISE_TF_MIRROR at it:
    mkdir -p /tmp/aws-mirror && cd /tmp/aws-mirror
    printf 'terraform {\n  required_providers {\n    aws = { source = "hashicorp/aws", version = "~> 5.100" }\n  }\n}\n' > main.tf
    terraform providers mirror -platform=linux_amd64 /opt/tf-plugins
EOF
  status=1
fi
exit $status
