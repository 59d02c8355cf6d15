// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

using SafeTransfer for address;

interface IERC20 {
    function transfer(address to, uint256 amount) external returns (bool);
    function balanceOf(address owner) external view returns (uint256);
}

library SafeTransfer {
    function send(address token, address to, uint256 amount) internal {
        require(IERC20(token).transfer(to, amount), "transfer failed");
    }
}

contract Vesting {
    struct Grant {
        uint256 total;
        uint256 claimed;
        uint64 start;
    }

    enum State { Active, Revoked }

    event Claimed(address indexed who, uint256 amount);
    error NothingToClaim();

    address public immutable token;
    uint64 public constant DURATION = 365 days;
    mapping(address => Grant) public grants;
    State public state;

    modifier active() {
        require(state == State.Active, "revoked");
        _;
    }

    constructor(address token_) {
        token = token_;
    }

    function vested(address who) public view returns (uint256) {
        Grant memory g = grants[who];
        if (block.timestamp >= g.start + DURATION) {
            return g.total;
        }
        return g.total * (block.timestamp - g.start) / DURATION;
    }

    function claim() external active {
        uint256 amount = vested(msg.sender) - grants[msg.sender].claimed;
        if (amount == 0) revert NothingToClaim();
        grants[msg.sender].claimed += amount;
        SafeTransfer.send(token, msg.sender, amount);
        emit Claimed(msg.sender, amount);
    }
}
