// A Slurm cluster from a TypeScript program, through the slurm-stack component package.
// tests/test_package_examples.py checks every property of the SlurmCluster arguments below
// against the package schema and constructs the cluster from them.
import * as k8s from "@pulumi/kubernetes";
import * as slurm from "@pulumi/slurm-stack";

// Every object of the cluster goes into the namespace the spec names: create it first and
// protect it (deleting a Namespace deletes the cluster's retained volumes with it).
const namespace = new k8s.core.v1.Namespace(
    "research",
    { metadata: { name: "research" } },
    { protect: true },
);

const cluster = new slurm.SlurmCluster(
    "research",
    {
        name: "research",
        namespace: "research",
        login: {
            replicas: 2,
            users: [
                {
                    name: "alice",
                    authorizedKeys: [
                        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGqyBO8cZ1qbBKq1WLHVpAMsT5t7dfBZb5CmG0r0lMb2 alice@example",
                    ],
                },
            ],
            service: { type: "LoadBalancer", loadBalancerSourceRanges: ["198.51.100.0/24"] },
        },
        workerPools: [
            { name: "cpu", replicas: 2 },
            {
                name: "gpu",
                replicas: 4,
                gpus: 8,
                gpuType: "h100",
                resources: { requests: { cpu: "32", memory: "256Gi" } },
            },
        ],
        partitions: [
            { name: "main", default: true },
            { name: "gpu", pools: ["gpu"], maxTime: "2-00:00:00" },
        ],
        jail: { storageClass: "nfs", size: "1Ti" },
    },
    { dependsOn: [namespace] },
);

export const sshCommand = cluster.sshCommand;
export const configHash = cluster.configHash;
